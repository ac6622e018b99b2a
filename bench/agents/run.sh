#!/usr/bin/env bash
# Runs one real agent CLI against `deno run -A src/cli/serve.ts` on this machine, with the configuration the
# README gives, on a short task in a scratch folder, and keeps the client's output, the server's log and the
# folder's files. Used on the lent H200, where the clients' 8-20k-token prompts prefill in
# seconds; lavapipe would take minutes per turn.
#   bench/agents/run.sh claude|codex|pi|opencode OUT_DIR
# Each client's binary is looked for under .clients/ (see bench/agents/README.md for how to stage them).
set -uo pipefail
client=$1; out=$2; root=$(pwd); port=${PORT:-8080}
mkdir -p "$out"
# The clients travel as xz parts (a call carries at most 64 MiB); unpack once they are all there.
if [ ! -d ".clients/$client" ]; then
  mkdir -p ".clients/$client" && cat .clients/$client.tar.xz* | tar -xJ -C ".clients/$client" || exit 1
fi
work=$(mktemp -d /tmp/flint-agent-XXXX); home=$(mktemp -d /tmp/flint-home-XXXX)
task="Create a file hello.py that prints hello from flint, then run it with python3."
model=flint-coder-19m-mlx-4bit

deno run -A src/cli/serve.ts --port "$port" > "$out/$client-server.log" 2>&1 &
server=$!
for _ in $(seq 1 120); do grep -q "Listening on" "$out/$client-server.log" && break; sleep 0.5; done
grep -q "Listening on" "$out/$client-server.log" || { echo "server did not start"; cat "$out/$client-server.log"; exit 1; }
cd "$work"
SECONDS=0
case $client in
  claude)
    env -i PATH=/usr/bin:/bin HOME="$home" ANTHROPIC_BASE_URL=http://127.0.0.1:$port ANTHROPIC_AUTH_TOKEN=flint \
      ANTHROPIC_MODEL=$model CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096 \
      CLAUDE_CODE_MAX_CONTEXT_TOKENS=65536 \
      timeout 300 "$root/.clients/claude/claude" -p "$task" --allowedTools Bash,Read,Edit,Write --max-turns 4 \
      > "$out/claude.txt" 2>&1 < /dev/null
    ;;
  codex)
    mkdir -p "$home/.codex"
    cat > "$home/.codex/config.toml" <<TOML
model = "$model"
model_provider = "flint"
model_context_window = 32768
model_auto_compact_token_limit = 24000
[model_providers.flint]
name = "Flint"
base_url = "http://127.0.0.1:$port/v1"
wire_api = "responses"
TOML
    env -i PATH=/usr/bin:/bin HOME="$home" timeout 300 "$root/.clients/codex/bin/codex" exec --skip-git-repo-check \
      -s workspace-write "$task" > "$out/codex.txt" 2>&1 < /dev/null
    ;;
  pi)
    # PI_API: openai-completions (default), openai-responses or anthropic-messages.
    api=${PI_API:-openai-completions}; base=http://127.0.0.1:$port/v1
    [ "$api" = anthropic-messages ] && base=http://127.0.0.1:$port
    mkdir -p "$home/.pi/agent"
    cat > "$home/.pi/agent/models.json" <<JSON
{ "providers": { "flint": { "baseUrl": "$base", "api": "$api", "apiKey": "flint",
  "models": [ { "id": "$model", "contextWindow": 32768, "maxTokens": 4096 } ] } } }
JSON
    env -i PATH=/usr/bin:/bin:/usr/local/bin HOME="$home" DENO_NO_UPDATE_CHECK=1 timeout 300 deno run -A \
      "$root/.clients/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js" --provider flint --model $model \
      -p "$task" > "$out/pi.txt" 2>&1 < /dev/null
    ;;
  opencode)
    mkdir -p "$home/.config/opencode"
    cat > "$home/.config/opencode/opencode.json" <<JSON
{ "\$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
  "model": "flint/$model", "small_model": "flint/$model",
  "provider": { "flint": { "npm": "@ai-sdk/openai-compatible", "name": "Flint",
    "options": { "baseURL": "http://127.0.0.1:$port/v1", "apiKey": "flint" },
    "models": { "$model": { "name": "Flint", "limit": { "context": 32768, "output": 4096 } } } } } }
JSON
    env -i PATH=/usr/bin:/bin HOME="$home" OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 \
      timeout 300 "$root/.clients/opencode/opencode" run "$task" > "$out/opencode.txt" 2>&1 < /dev/null
    ;;
esac
rc=$?

echo "$client exit $rc after ${SECONDS} s" | tee "$out/$client-exit.txt"
ls -la "$work" >> "$out/$client-exit.txt"; for f in "$work"/*; do [ -f "$f" ] && { echo "== $f"; head -c 2000 "$f"; }; done >> "$out/$client-exit.txt"
kill $server; wait $server 2>/dev/null
tail -5 "$out/$client.txt"
