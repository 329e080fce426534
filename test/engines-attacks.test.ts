import { after, before } from 'node:test';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import { gradingAttacksWithTools } from './support/attack-suite.js';
import { startEngines, type TestEngine } from './support/engines.js';

/**
 * The attacks that need tools in the image, against an engine pool of two extra dockerd on this
 * machine (engines.test.ts runs the rest of the suite): a file of its own, as they take minutes.
 */
let engines: TestEngine[] = [];
let shared: EnginePool | null = null;
before(async () => {
  engines = await startEngines(2);
});
after(async () => {
  await shared?.closeAll();
  await Promise.all(engines.map((e) => e.destroy()));
});

gradingAttacksWithTools(
  'engine pool',
  () => (shared ??= new EnginePool(engines.map((e) => ({ name: e.name, host: e.host, capacity: 3, labels: {} })))),
);
