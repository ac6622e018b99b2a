/** Tool schemas as coding agents send them (Claude Code and Codex style), for the tool-call grammar tests. */
import type { ToolSpec } from "../../src/grammar/tool_call.ts";

const DRAFT7 = "http://json-schema.org/draft-07/schema#";

export const BASH: ToolSpec = {
  name: "Bash",
  parameters: {
    type: "object",
    properties: {
      command: { type: "string", description: "The command to execute" },
      timeout: { type: "number", description: "Optional timeout in milliseconds (max 600000)" },
      description: { type: "string", description: "Clear, concise description of what this command does" },
      run_in_background: { type: "boolean", description: "Run this command in the background" },
    },
    required: ["command"],
    additionalProperties: false,
    $schema: DRAFT7,
  },
};

export const EDIT: ToolSpec = {
  name: "Edit",
  parameters: {
    type: "object",
    properties: {
      file_path: { type: "string", description: "The absolute path to the file to modify" },
      old_string: { type: "string", description: "The text to replace" },
      new_string: { type: "string", description: "The text to replace it with" },
      replace_all: { type: "boolean", default: false, description: "Replace all occurences of old_string" },
    },
    required: ["file_path", "old_string", "new_string"],
    additionalProperties: false,
    $schema: DRAFT7,
  },
};

export const TODO_WRITE: ToolSpec = {
  name: "TodoWrite",
  parameters: {
    type: "object",
    properties: {
      todos: {
        type: "array",
        items: {
          type: "object",
          properties: {
            content: { type: "string", minLength: 1 },
            status: { type: "string", enum: ["pending", "in_progress", "completed"] },
            activeForm: { type: "string", minLength: 1 },
          },
          required: ["content", "status", "activeForm"],
          additionalProperties: false,
        },
        description: "The updated todo list",
      },
    },
    required: ["todos"],
    additionalProperties: false,
    $schema: DRAFT7,
  },
};

export const READ: ToolSpec = {
  name: "Read",
  parameters: {
    type: "object",
    properties: {
      file_path: { type: "string" },
      offset: { type: "number" },
      limit: { type: "number" },
    },
    required: ["file_path"],
    additionalProperties: false,
  },
};

export const WEB_FETCH: ToolSpec = {
  name: "WebFetch",
  parameters: {
    type: "object",
    properties: {
      url: { type: "string", format: "uri", description: "The URL to fetch content from" },
      prompt: { type: "string", description: "The prompt to run on the fetched content" },
    },
    required: ["url", "prompt"],
    additionalProperties: false,
  },
};

/** Codex's shell tool: argv form, optional working directory and timeout. */
export const SHELL: ToolSpec = {
  name: "shell",
  parameters: {
    type: "object",
    properties: {
      command: { type: "array", items: { type: "string" }, description: "The command to execute" },
      workdir: { type: "string", description: "The working directory to execute the command in" },
      timeout_ms: { type: "integer", description: "The timeout for the command in milliseconds" },
    },
    required: ["command"],
    additionalProperties: false,
  },
};

/** Codex's plan tool: steps with a status enum, an optional explanation. */
export const UPDATE_PLAN: ToolSpec = {
  name: "update_plan",
  parameters: {
    type: "object",
    properties: {
      explanation: { type: "string" },
      plan: {
        type: "array",
        items: {
          type: "object",
          properties: {
            step: { type: "string" },
            status: { type: "string", enum: ["pending", "in_progress", "completed"] },
          },
          required: ["step", "status"],
          additionalProperties: false,
        },
      },
    },
    required: ["plan"],
    additionalProperties: false,
  },
};

/** An MCP-style tool with a free-form object argument. */
export const MCP_QUERY: ToolSpec = {
  name: "mcp__db__query",
  parameters: {
    type: "object",
    properties: {
      sql: { type: "string" },
      params: { type: "array", items: {} },
      options: { type: "object", additionalProperties: true },
    },
    required: ["sql"],
  },
};

export const AGENT_TOOLS: ToolSpec[] = [
  BASH,
  EDIT,
  TODO_WRITE,
  READ,
  WEB_FETCH,
  SHELL,
  UPDATE_PLAN,
  MCP_QUERY,
];
