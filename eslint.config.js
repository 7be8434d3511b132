// Lint rules: typescript-eslint's type-aware recommended set, plus the few rules that keep failure
// handling uniform (no floating promises, errors thrown as Error objects).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '**/dist.*/**', '.tmp/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's describe/it return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test'] },
          ],
        },
      ],
      '@typescript-eslint/only-throw-error': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'off',
    },
  },
  {
    // Text reaches a terminal through one escaping sink (packages/knotless-core/src/text/terminal.ts):
    // a hostile ref name or PDS message must never be written raw.
    files: ['packages/knotless/src/**/*.ts', 'packages/knotless-core/src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "MemberExpression[object.object.name='process'][object.property.name=/^(stdout|stderr)$/][property.name='write']",
          message:
            'Print through printErr/safeIo (text/terminal.ts in knotless-core, cli/io.ts in knotless), which escape network text.',
        },
        {
          // Merely reading process.stdin/stdout/stderr makes a stream, and a stream on an inherited
          // pipe turns it non-blocking for git sharing it: git's own output is then cut short.
          selector: "MemberExpression[object.name='process'][property.name=/^(stdin|stdout|stderr)$/]",
          message:
            'Never make a stream on an inherited descriptor: write and read fds 0-2 through knotless-core/text/fd-io.',
        },
        {
          selector: "MemberExpression[object.name='console'][property.name=/^(log|error|warn|info)$/]",
          message:
            'Print through printErr/safeIo (text/terminal.ts in knotless-core, cli/io.ts in knotless), which escape network text.',
        },
      ],
    },
  },
  {
    files: ['eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The committed executable stubs: plain CommonJS that must run before any build.
    files: ['**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'commonjs',
      globals: { process: 'readonly', require: 'readonly', __dirname: 'readonly' },
    },
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
);
