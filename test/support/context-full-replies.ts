/**
 * TEST DATA. How each server answers a request that does not fit the model's context: status and
 * body as the server sends them, for the scripted model server's `error` fault. The wordings were
 * taken from the servers' own code and from issues quoting their responses (sources beside each).
 */
export interface ContextFullReply {
  server: string;
  status: number;
  body: unknown;
}

const flat = (message: string) => ({ object: 'error', message, type: 'BadRequestError', param: null, code: 400 });
const nested = (message: string) => ({ error: { message, type: 'BadRequestError', param: null, code: 400 } });

export const CONTEXT_FULL_REPLIES: ContextFullReply[] = [
  // OpenAI: code context_length_exceeded, with the classic wording and with a newer one.
  {
    server: 'OpenAI',
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  {
    server: 'OpenAI (code only)',
    status: 400,
    body: {
      error: {
        message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
        type: 'invalid_request_error',
        param: 'input',
        code: 'context_length_exceeded',
      },
    },
  },
  // vLLM >= 0.10.1 nests the error (vllm-project/vllm#22099); before, it was flat (vllm-project/vllm#12886).
  {
    server: 'vLLM',
    status: 400,
    body: nested(
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
    ),
  },
  {
    server: 'vLLM (flat, < 0.10.1)',
    status: 400,
    body: flat(
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
    ),
  },
  {
    server: 'vLLM (prompt length check)',
    status: 400,
    body: nested(
      'The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens.',
    ),
  },
  { server: 'vLLM (no room for a reply)', status: 400, body: flat('max_tokens must be at least 1, got -186.') },
  // SGLang answers flat (QwenLM/Qwen3#1321, sgl-project/sglang#4048).
  {
    server: 'SGLang',
    status: 400,
    body: flat("The input (61709 tokens) is longer than the model's context length (40960 tokens)."),
  },
  {
    server: 'SGLang (with the reply)',
    status: 400,
    body: flat(
      "Requested token count exceeds the model's maximum context length of 64000 tokens. You requested a total of 71897 tokens: 7897 tokens from the input messages and 64000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
    ),
  },
  {
    server: 'SGLang (allowed length)',
    status: 400,
    body: flat('Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens).'),
  },
  // llama.cpp server: exceed_context_size_error (ggml-org/llama.cpp#15780, #17284, #19774).
  {
    server: 'llama.cpp',
    status: 400,
    body: {
      error: {
        code: 400,
        message: 'the request exceeds the available context size, try increasing it',
        type: 'exceed_context_size_error',
        n_prompt_tokens: 14429,
        n_ctx: 8192,
      },
    },
  },
  {
    server: 'llama.cpp (with counts)',
    status: 400,
    body: {
      error: {
        code: 400,
        message: 'request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it',
        type: 'exceed_context_size_error',
        n_prompt_tokens: 4476,
        n_ctx: 4096,
      },
    },
  },
  {
    server: 'llama.cpp (as a server error)',
    status: 500,
    body: { error: { code: 500, message: 'Context size has been exceeded.', type: 'server_error' } },
  },
  // TGI: 422 with the error as a string (huggingface/text-generation-inference#628, #695).
  {
    server: 'TGI',
    status: 422,
    body: {
      error:
        'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 1000 `max_new_tokens`',
      error_type: 'validation',
    },
  },
  {
    server: 'TGI (input alone)',
    status: 422,
    body: {
      error: 'Input validation error: `inputs` must have less than 2048 tokens. Given: 2222',
      error_type: 'validation',
    },
  },
  // Anthropic and servers compatible with it.
  {
    server: 'Anthropic-compatible',
    status: 400,
    body: {
      type: 'error',
      error: { type: 'invalid_request_error', message: 'prompt is too long: 208656 tokens > 200000 maximum' },
    },
  },
  {
    server: 'Anthropic-compatible (with max_tokens)',
    status: 400,
    body: {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message:
          'input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000, decrease input length or `max_tokens` and try again',
      },
    },
  },
  // A request too large for a proxy in front of the server (the agent's transcript grew past its
  // body limit): nginx's own page says nothing of tokens, and a JSON proxy says only the size.
  {
    server: 'nginx in front of a server (413, HTML)',
    status: 413,
    body: '<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>',
  },
  {
    server: 'a proxy (413, JSON)',
    status: 413,
    body: { error: { message: 'Request body exceeds the 10485760 byte limit', type: 'request_too_large' } },
  },
];

/** Errors that look alike but are not a full context: they stay what they were. */
export const NOT_CONTEXT_FULL: Array<ContextFullReply & { kind: string }> = [
  {
    server: 'Anthropic (max_tokens over the model limit)',
    status: 400,
    kind: 'bad_request',
    body: {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message:
          'max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620',
      },
    },
  },
  {
    server: 'TGI (max_new_tokens over the limit)',
    status: 422,
    kind: 'bad_request',
    body: { error: 'Input validation error: `max_new_tokens` must be <= 192. Given: 1000', error_type: 'validation' },
  },
  {
    server: 'vLLM (bad parameter)',
    status: 400,
    kind: 'bad_request',
    body: flat('temperature must be non-negative, got -1.0.'),
  },
  {
    server: 'a gateway in front of a server',
    status: 502,
    kind: 'transient',
    body: { error: { message: 'upstream connect error: the request exceeds the available context size' } },
  },
];
