import { defineConfig } from "vitest/config";
export default defineConfig({ test: { include: ["test/**/*_test.ts"] } });
