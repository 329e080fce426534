import { z } from 'zod';

export const MAX_DURATION_SEC = 60;

export const CommandSchema = z.object({
  keystrokes: z.string(),
  duration: z
    .number()
    .nonnegative()
    .default(1)
    .transform((d) => Math.min(d, MAX_DURATION_SEC)),
});

/** One Terminus-style turn: what the model thinks, what it will type, and whether it is done. */
export const TurnSchema = z.object({
  analysis: z.string().default(''),
  plan: z.string().default(''),
  commands: z.array(CommandSchema),
  task_complete: z.boolean().default(false),
});
export type Turn = z.infer<typeof TurnSchema>;

export type ParseResult = { ok: true; turn: Turn; warnings: string[] } | { ok: false; error: string };

/** Appends the closers a truncated JSON object lacks, ignoring brackets inside strings. */
function closeBrackets(text: string): string | null {
  const stack: string[] = [];
  let inString = false;
  let escaped = false;
  for (const ch of text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === '\\') escaped = true;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === '{') stack.push('}');
    else if (ch === '[') stack.push(']');
    else if (ch === '}' || ch === ']') {
      if (stack.pop() !== ch) return null;
    }
  }
  if (inString || stack.length === 0) return null;
  return text + stack.reverse().join('');
}

/**
 * Reads a model reply as a turn. Obvious repairs are made and reported as warnings (prose or a
 * code fence around the JSON; missing closing braces); anything else is an error to show the
 * model, and nothing is executed.
 */
export function parseTurn(reply: string): ParseResult {
  const warnings: string[] = [];
  let text = reply.trim();
  const start = text.indexOf('{');
  if (start < 0) return { ok: false, error: 'no JSON object found in the reply' };
  const end = text.lastIndexOf('}');
  const before = text.slice(0, start).trim();
  const after = end > start ? text.slice(end + 1).trim() : '';
  if (before || after) warnings.push('extra text around the JSON object was ignored');
  text = end > start ? text.slice(start, end + 1) : text.slice(start);

  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    // The cut may have fallen inside the object: try the whole tail with its closers added.
    const repaired = closeBrackets(reply.trim().slice(start));
    if (repaired === null) return { ok: false, error: `invalid JSON: ${(err as Error).message}` };
    try {
      raw = JSON.parse(repaired);
      warnings.push('missing closing brackets were added');
    } catch {
      // The repair did not parse either: the first parse's error is the one the model can act on.
      return { ok: false, error: `invalid JSON: ${(err as Error).message}` };
    }
  }
  const parsed = TurnSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { ok: false, error: `field "${issue.path.join('.') || '(root)'}": ${issue.message}` };
  }
  const r = raw as Record<string, unknown>;
  if (!('analysis' in r) || !('plan' in r)) warnings.push('"analysis" or "plan" is missing');
  return { ok: true, turn: parsed.data, warnings };
}
