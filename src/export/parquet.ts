import { writeFile } from 'node:fs/promises';
import { parquetWriteBuffer } from 'hyparquet-writer';

/**
 * Parquet columns for the exported datasets, declared once: a column is a name, a value per row,
 * and its Parquet shape (nested lists and structs where a dataset's users expect them: the
 * `messages` column is a list of OpenAI messages, ready for a chat template; tool-call arguments
 * and tool schemas stay JSON strings, as chat templates want them).
 */
type SchemaElement = Record<string, unknown> & { name: string };

export type Shape = 'string' | 'double' | 'int64' | 'bool' | { list: Shape } | { struct: Record<string, Shape> };

function elements(name: string, shape: Shape, repetition = 'OPTIONAL'): SchemaElement[] {
  if (shape === 'string') return [{ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: repetition }];
  if (shape === 'double') return [{ name, type: 'DOUBLE', repetition_type: repetition }];
  if (shape === 'int64') return [{ name, type: 'INT64', repetition_type: repetition }];
  if (shape === 'bool') return [{ name, type: 'BOOLEAN', repetition_type: repetition }];
  if ('list' in shape) {
    return [
      { name, repetition_type: repetition, converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      ...elements('element', shape.list),
    ];
  }
  const fields = Object.entries(shape.struct);
  return [
    { name, repetition_type: repetition, num_children: fields.length },
    ...fields.flatMap(([k, v]) => elements(k, v)),
  ];
}

/** The same value with each struct's absent fields made null (Parquet needs every field). */
function conform(value: unknown, shape: Shape): unknown {
  if (value === undefined || value === null) return null;
  if (shape === 'int64') return BigInt(Math.round(value as number));
  if (typeof shape === 'string') return value;
  if ('list' in shape) return (value as unknown[]).map((v) => conform(v, shape.list));
  const o = value as Record<string, unknown>;
  return Object.fromEntries(Object.entries(shape.struct).map(([k, s]) => [k, conform(o[k], s)]));
}

export interface Column<Row> {
  name: string;
  shape: Shape;
  value: (row: Row) => unknown;
}

/** Writes rows as one Parquet file with the given columns. */
export async function writeParquet<Row>(file: string, rows: Row[], columns: Array<Column<Row>>): Promise<void> {
  const schema = [{ name: 'root', num_children: columns.length }, ...columns.flatMap((c) => elements(c.name, c.shape))];
  const buffer = parquetWriteBuffer({
    columnData: columns.map((c) => ({ name: c.name, data: rows.map((r) => conform(c.value(r), c.shape)) as never })),
    schema: schema,
    kvMetadata: [{ key: 'created_by_app', value: 'termgrade' }],
  });
  await writeFile(file, Buffer.from(buffer));
}

/** An OpenAI chat message as a Parquet struct. */
export const MESSAGE: Shape = {
  struct: {
    role: 'string',
    content: 'string',
    tool_call_id: 'string',
    name: 'string',
    tool_calls: {
      list: { struct: { id: 'string', type: 'string', function: { struct: { name: 'string', arguments: 'string' } } } },
    },
  },
};
