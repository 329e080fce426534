import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A generator model for `termgrade synth` written from the README ("From seeds to a training set")
 * and src/synth/schema.ts only, as a team would write its own: an OpenAI-compatible endpoint on
 * loopback (GET /v1/models, POST /v1/chat/completions) that answers each part's request with a
 * JSON object of that part's schema. It shares nothing with the project's scripted generator.
 *
 * What it writes follows the prompt to the letter: the Dockerfile copies folders the normal way
 * (`COPY share/ /srv/share/`, `COPY ./data/ /srv/data/`), and test.sh prints each test's line in
 * the shape of the report lines the system prompt shows (their status words, their id with only the
 * test's own suffix added, their separator before a failure's reason).
 *
 * It can go down and come back (`goDownAfter`: after that many chat calls the listener closes and
 * every connection is dropped; `comeBack` listens again on the same port).
 */
export class ReadmeGenerator {
  private server: Server | null = null;
  private port = 0;
  chatCalls = 0;
  /** The system prompts seen, for the test to read what was asked. */
  readonly systemPrompts = new Set<string>();

  constructor(
    private readonly options: { model: string; key: string; goDownAfter?: number } = { model: 'gen', key: 'k' },
  ) {}

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.baseUrl;
  }

  /** The endpoint goes away: nothing listens on its port. */
  async goDown(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  async comeBack(goDownAfter?: number): Promise<void> {
    this.options.goDownAfter = goDownAfter;
    await this.start();
  }

  close(): Promise<void> {
    return this.goDown();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${this.options.key}`)
      return send(401, { error: { message: 'invalid api key', type: 'invalid_request_error' } });
    if (req.method === 'GET' && req.url === '/v1/models')
      return send(200, { object: 'list', data: [{ id: this.options.model, object: 'model' }] });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return send(404, { error: { message: 'no' } });
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    const body = JSON.parse(raw) as { model: string; messages: Array<{ role: string; content: string }> };
    if (body.model !== this.options.model) return send(404, { error: { message: `no model ${body.model}` } });
    this.chatCalls++;
    const system = body.messages.find((m) => m.role === 'system')?.content ?? '';
    this.systemPrompts.add(system);
    const request = JSON.parse(body.messages.find((m) => m.role === 'user')!.content) as Record<string, unknown>;
    const part = writePart(request, system);
    const goingDown = this.options.goDownAfter !== undefined && this.chatCalls >= this.options.goDownAfter;
    // Down once this reply has left: the next call finds nothing listening.
    if (goingDown) res.on('finish', () => void this.goDown());
    send(200, {
      id: `c${this.chatCalls}`,
      object: 'chat.completion',
      model: this.options.model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: JSON.stringify(part) } }],
      usage: { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 },
    });
  }
}

/** The numbers each seed's task sums: the seed's `n` decides them, so seeds make different tasks. */
const numbersOf = (n: number): number[] => [n, n * 3 + 1, n * 7 + 2, 11 * n + 5];

/**
 * The report lines' shape, read from the system prompt's examples: the first line starting with a
 * status word for a pass and one for a failure. A test's line is the example's with `_NAME` added
 * to its id; a failure's reason follows the example's separator.
 */
function reportShape(system: string): { pass: (name: string) => string; fail: (name: string) => string } {
  const lines = system.split('\n');
  const pass = lines.find((l) => /^PASSED /.test(l)) ?? 'PASSED name';
  const fail = lines.find((l) => /^FAILED /.test(l)) ?? 'FAILED name - why';
  const passId = pass.slice('PASSED '.length);
  const failRest = fail.slice('FAILED '.length);
  const dash = failRest.indexOf(' - ');
  const failId = dash >= 0 ? failRest.slice(0, dash) : failRest;
  return {
    pass: (name) => `PASSED ${passId}_${name}`,
    fail: (name) => `FAILED ${failId}_${name}${dash >= 0 ? ' - ' : ' '}`,
  };
}

/** One part of the task for the request's stage (README: scenario, environment, instruction, solution, tests). */
function writePart(request: Record<string, unknown>, system: string): unknown {
  const seed = request.seed as { id?: string; n?: number };
  const n = seed.n ?? 1;
  const nums = numbersOf(n);
  const total = nums.reduce((a, b) => a + b, 0);
  const out = `/srv/out/total-${seed.id ?? n}.txt`;
  switch (request.stage) {
    case 'scenario':
      return {
        domain: 'data files',
        startingState: `a list of numbers in /srv/data/numbers-${n}.txt and a helper script under /srv/share`,
        goal: `write the sum of the numbers to ${out}`,
        constraints: ['offline'],
        checkable: [`${out} holds the sum`],
        outputs: [out],
      };
    case 'environment':
      return {
        dockerfile: [
          'FROM debian:bookworm-slim',
          'WORKDIR /srv',
          'COPY share/ /srv/share/',
          'COPY ./data/ /srv/data/',
          'COPY --chmod=755 share/bin/ /usr/local/bin/',
          '',
        ].join('\n'),
        files: [
          { path: 'share/bin/sum-help.sh', content: '#!/bin/sh\necho "add the numbers, one per line"\n' },
          { path: `data/numbers-${n}.txt`, content: `${nums.join('\n')}\n` },
        ],
        statePaths: ['/srv'],
        tools: ['awk'],
        commands: [`cat /srv/data/numbers-${n}.txt`],
      };
    case 'instruction':
      return {
        instruction: `The file /srv/data/numbers-${n}.txt holds one number per line. Write their sum, as a plain integer followed by a newline, to ${out} (create /srv/out if needed).\n`,
      };
    case 'solution':
      return {
        solveSh: `#!/bin/sh\nset -e\nmkdir -p /srv/out\nawk '{ s += $1 } END { print s }' /srv/data/numbers-${n}.txt > ${out}\n`,
      };
    case 'tests': {
      const shape = reportShape(system);
      const check = (name: string, cond: string): string =>
        `if ${cond}; then echo "${shape.pass(name)}"; else echo "${shape.fail(name)}${name} failed"; ok=0; fi\n`;
      return {
        testSh:
          '#!/bin/bash\nok=1\n' +
          check('output_exists', `[ -f ${out} ]`) +
          check('total_is_right', `[ "$(cat ${out} 2>/dev/null)" = "${total}" ]`) +
          check('input_kept', `[ "$(wc -l < /srv/data/numbers-${n}.txt)" = "${nums.length}" ]`) +
          'mkdir -p /logs/verifier\nif [ $ok = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
        files: [],
      };
    }
    default:
      throw new Error(`unknown stage ${String(request.stage)}`);
  }
}
