import { defineConfig } from "vitest/config";

// Tests run on a software GPU (lavapipe) in CI: generous timeouts, and files in parallel only up to the
// two cores CI has.
export default defineConfig({
  test: {
    include: ["test/**/*_test.ts"],
    testTimeout: 600_000,
    hookTimeout: 600_000,
    maxWorkers: 2,
  },
});
