import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * TEST DOUBLE. A team's own generator model for `termgrade synth`, written from two sources only:
 * the README's "From seeds to a training set" and src/synth/schema.ts (the parts' fields). It
 * shares no code or assumption with the project's scripted generator (scripted-generator.ts): it
 * tells the part asked for by the fields of the JSON Schema sent as `response_format` (a
 * `dockerfile` field: the environment; `testSh`: the tests ...), reads the seed from the request's
 * `seed`, and answers on loopback as any OpenAI-compatible server does (GET /v1/models, POST
 * /v1/chat/completions, a bearer key).
 *
 * What it writes is what a careful author writes: a two-stage Dockerfile copying folders the
 * usual ways (`dir/`, JSON form, `./dir/`, `--chown`, `--chmod`, a glob beside a file into a
 * folder, `--from` an earlier stage), and a test.sh printing one line per test in the form the
 * README says the prompt asks for: `PASSED FILE::NAME`, or `FAILED FILE::NAME - why`.
 *
 * Its state, set by the test: `up` answers; `down` answers every request 503, as a gateway does
 * when the model server behind it is gone (`downAfter`: down once that many parts are answered);
 * `refusing` answers chat requests 400, as a server does that takes no json_schema response_format.
 * It can also go away: `dropAfter` (once that many parts are answered) closes the listener and
 * drops every connection once that part's reply has left, so the next call finds nothing
 * listening; `comeBack` listens again on the same port.
 */
export type TeamGeneratorState = 'up' | 'down' | 'refusing';

/** The test ids its test.sh reports, in order. */
export const TEAM_TESTS = [
  'test_outputs.py::test_total_written',
  'test_outputs.py::test_total_is_the_sum',
  'test_outputs.py::test_inbox_untouched',
] as const;

export class TeamGenerator {
  private server: Server | null = null;
  state: TeamGeneratorState = 'up';
  /** Parts answered (200). */
  answered = 0;
  /** Requests answered 503 or 400. */
  refused = 0;
  downAfter: number | null = null;
  dropAfter: number | null = null;
  readonly systemPrompts = new Set<string>();
  private port = 0;

  constructor(
    readonly model: string,
    private readonly key: string,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Listens again on the port it had, answering (after `dropAfter` took it away). */
  async comeBack(): Promise<void> {
    this.dropAfter = null;
    await this.start();
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    if (this.state === 'down') {
      this.refused++;
      return reply(503, { error: { message: 'upstream model server unavailable', type: 'service_unavailable' } });
    }
    if (req.headers.authorization !== `Bearer ${this.key}`)
      return reply(401, { error: { message: 'bad key', type: 'authentication_error' } });
    if (req.method === 'GET' && req.url === '/v1/models')
      return reply(200, { object: 'list', data: [{ id: this.model, object: 'model', owned_by: 'team' }] });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
      return reply(404, { error: { message: `no route ${req.method} ${req.url}` } });
    const body = JSON.parse(raw) as ChatBody;
    if (body.model !== this.model) return reply(404, { error: { message: `model ${body.model} not found` } });
    if (this.state === 'refusing' || body.response_format?.type !== 'json_schema') {
      this.refused++;
      return reply(400, {
        error: { message: "response_format of type 'json_schema' is not supported", type: 'invalid_request_error' },
      });
    }
    for (const m of body.messages) if (m.role === 'system') this.systemPrompts.add(m.content);
    const user = [...body.messages].reverse().find((m) => m.role === 'user')!;
    const request = JSON.parse(user.content) as { seed: TeamSeed };
    const fields = Object.keys(body.response_format.json_schema.schema.properties ?? {});
    const content = JSON.stringify(partFor(fields, request.seed));
    this.answered++;
    if (this.downAfter !== null && this.answered >= this.downAfter) this.state = 'down';
    // Gone once this reply has left: the next call finds nothing listening.
    if (this.dropAfter !== null && this.answered >= this.dropAfter) res.on('finish', () => void this.close());
    reply(200, {
      id: `team-${this.answered}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: this.model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
      usage: { prompt_tokens: 40, completion_tokens: 20, total_tokens: 60 },
    });
  }
}

interface ChatBody {
  model: string;
  messages: Array<{ role: string; content: string }>;
  response_format?: { type: string; json_schema: { name: string; schema: { properties?: Record<string, unknown> } } };
}

/** A seeds line of the test: an id, what is counted, and the quantities its two CSV files hold. */
export interface TeamSeed {
  id: string;
  counts: string;
  quantities: number[];
}

/** The part whose JSON Schema has these fields (schema.ts: ScenarioSchema, EnvironmentPartSchema ...). */
function partFor(fields: string[], seed: TeamSeed): unknown {
  const out = `/work/out/${seed.id}-total.txt`;
  const half = Math.ceil(seed.quantities.length / 2);
  const csv = (qs: number[]): string => `item,qty\n${qs.map((q, i) => `item${i},${q}`).join('\n')}\n`;
  const total = seed.quantities.reduce((a, b) => a + b, 0);
  if (fields.includes('domain'))
    return {
      domain: 'inventory',
      startingState: `two CSV files counting ${seed.counts} in /work/inbox`,
      goal: `write the total quantity over both files to ${out}`,
      constraints: ['work offline', 'leave /work/inbox as it is'],
      checkable: [`${out} holds the total`, '/work/inbox is unchanged'],
      outputs: [out],
    };
  if (fields.includes('dockerfile'))
    return {
      dockerfile: [
        'FROM debian:bookworm-slim AS notes',
        'RUN mkdir -p /opt/notes && echo "columns: item,qty" > /opt/notes/format.txt',
        '',
        'FROM debian:bookworm-slim',
        'WORKDIR /work',
        'COPY share/ /srv/share/',
        'COPY ["share/", "/opt/share/"]',
        'COPY --chown=root:root ./inbox/ /work/inbox/',
        'COPY inbox/*.csv README.txt /srv/originals/',
        'COPY --chmod=755 share/bin/ /usr/local/bin/',
        'COPY --from=notes /opt/notes/ /opt/notes/',
        '',
      ].join('\n'),
      files: [
        { path: 'README.txt', content: 'Quantities are whole numbers.\n' },
        { path: 'share/bin/inbox-files', content: '#!/bin/sh\nls /work/inbox\n' },
        { path: `inbox/${seed.id}-a.csv`, content: csv(seed.quantities.slice(0, half)) },
        { path: `inbox/${seed.id}-b.csv`, content: csv(seed.quantities.slice(half)) },
      ],
      statePaths: ['/work', '/srv'],
      tools: ['awk'],
      commands: ['inbox-files', 'cat /opt/notes/format.txt'],
    };
  if (fields.includes('instruction'))
    return {
      instruction: `We keep count of ${seed.counts} in /work/inbox/${seed.id}-a.csv and /work/inbox/${seed.id}-b.csv (a header line, then item,qty rows). Write how many there are in all, as a whole number and a newline, to ${out}. Leave both CSV files as they are.\n`,
    };
  if (fields.includes('solveSh'))
    return {
      solveSh: `#!/bin/bash\nset -euo pipefail\nmkdir -p /work/out\nawk -F, 'FNR > 1 { s += $2 } END { print s }' /work/inbox/*.csv > ${out}\n`,
    };
  if (fields.includes('testSh')) {
    const [written, sum, untouched] = TEAM_TESTS;
    const check = (id: string, cond: string, why: string): string =>
      `if ${cond}; then echo "PASSED ${id}"; else echo "FAILED ${id} - ${why}"; ok=0; fi\n`;
    return {
      testSh:
        '#!/bin/bash\nok=1\n' +
        check(written, `[ -f ${out} ]`, `${out} is missing`) +
        check(sum, `[ "$(cat ${out} 2>/dev/null)" = "${total}" ]`, `expected ${total}`) +
        check(untouched, `cmp -s /work/inbox/${seed.id}-a.csv /srv/originals/${seed.id}-a.csv`, 'the inbox changed') +
        'mkdir -p /logs/verifier\necho $ok > /logs/verifier/reward.txt\n',
      files: [],
    };
  }
  throw new Error(`the team generator knows no part with the fields ${fields.join(', ')}`);
}
