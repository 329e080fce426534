// ESLint flat config: type-aware promise rules everywhere, function length and layering in src/.
// The layering rules are the ones docs/architecture.md states; change both together.
import tseslint from 'typescript-eslint';

const promiseRules = {
  // node:test's top-level test()/describe() promises are tracked by the runner itself (its docs say
  // they need not be awaited); a subtest's t.test() is not listed here, so it must be awaited.
  '@typescript-eslint/no-floating-promises': [
    'error',
    {
      allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] }],
    },
  ],
  '@typescript-eslint/no-misused-promises': 'error',
  // An empty catch block must say why the failure is expected (a comment inside it is enough).
  'no-empty': ['error', { allowEmptyCatch: false }],
};

/** Import patterns (regexes over the import specifier) that a layer may not use, with why. */
const notCli = { regex: '^(\\.\\.?/)+cli/', message: 'only src/cli may import the CLI: it is the top layer' };
const notTests = { regex: '^(\\.\\./)+(test|bench)/', message: 'src/ never imports tests or benchmarks' };
const notFrontDoor = {
  regex: '^(\\.\\./)+index\\.js$',
  message: 'import the module itself, not the package front door (src/index.ts is for users and the CLI)',
};
const onlyUtil = {
  regex: '^\\.\\./(?!util/)',
  message: 'this layer imports nothing of termgrade but src/util (and libraries)',
};
const noSrc = { regex: '^\\.\\./', message: 'src/util is the bottom layer: it imports no other src folder' };
const noNodeIo = {
  regex: '^node:(?!assert)',
  message: 'src/stats is pure: data in, data out, no I/O or process state',
};

const restricted = (...patterns) => ({ 'no-restricted-imports': ['error', { patterns }] });

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'integrations/**', 'examples/**', 'test/fixtures/**', '**/*.js'] },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: promiseRules,
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      ...restricted(notCli, notTests, notFrontDoor),
    },
  },
  { files: ['src/cli/**/*.ts'], rules: restricted(notTests) },
  { files: ['src/util/**/*.ts'], rules: restricted(noSrc, notTests) },
  { files: ['src/stats/**/*.ts'], rules: restricted(onlyUtil, noNodeIo) },
  { files: ['src/model/**/*.ts', 'src/task/**/*.ts'], rules: restricted(onlyUtil, notTests) },
);
