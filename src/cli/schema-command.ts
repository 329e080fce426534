import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { TermgradeError } from '../util/errors.js';
import { jsonSchemaOf, OUTPUT_SCHEMAS, type OutputName } from './schemas.js';
import { EXIT } from './signals.js';

export async function schemaCommand(name: string | undefined, flags: { out?: string }): Promise<number> {
  const names = Object.keys(OUTPUT_SCHEMAS) as OutputName[];
  if (name !== undefined && !names.includes(name as OutputName))
    throw new TermgradeError('usage', `no schema "${name}" (known: ${names.join(', ')})`);
  if (flags.out) {
    await mkdir(flags.out, { recursive: true });
    for (const n of name ? [name as OutputName] : names)
      await writeFile(path.join(flags.out, `${n}.schema.json`), `${JSON.stringify(jsonSchemaOf(n), null, 2)}\n`);
    process.stdout.write(`wrote ${name ? 1 : names.length} schema(s) to ${flags.out}\n`);
    return EXIT.ok;
  }
  if (name) {
    process.stdout.write(`${JSON.stringify(jsonSchemaOf(name as OutputName), null, 2)}\n`);
    return EXIT.ok;
  }
  for (const n of names) process.stdout.write(`${n.padEnd(14)} ${OUTPUT_SCHEMAS[n].what}\n`);
  return EXIT.ok;
}
