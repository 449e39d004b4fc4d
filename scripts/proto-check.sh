#!/usr/bin/env bash
# proto-check: lint the protos and regenerate pkg/gen and openapi/ from them;
# fail when the generated code or OpenAPI documents in the work tree differ
# from a fresh generation (edited by hand, or a .proto changed without
# `make proto`).
#
# Needs: go (the plugins are pinned tool dependencies of the pkg module), npm
# packages installed (`npm ci`, for buf), and a git work tree.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

if [[ ! -x node_modules/.bin/buf ]]; then
  echo "proto-check: buf is not installed; run 'npm ci' in $root" >&2
  exit 2
fi

echo "proto-check: building protoc plugins into bin/"
go build -o bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
go build -o bin/protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go
go build -o bin/protoc-gen-openapiv2 github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2

echo "proto-check: buf format"
if ! npx --no-install buf format --diff --exit-code; then
  echo "proto-check: .proto files are not formatted; run 'npx buf format -w'" >&2
  exit 1
fi

echo "proto-check: buf lint"
npx --no-install buf lint

echo "proto-check: buf generate"
npx --no-install buf generate

# --untracked-files=all lists new files one by one, not just their directory.
changes="$(git status --porcelain --untracked-files=all -- pkg/gen openapi)"
if [[ -n "$changes" ]]; then
  echo "proto-check: generated code in pkg/gen or openapi/ is stale; run 'make proto' and commit:" >&2
  echo "$changes" >&2
  exit 1
fi
echo "proto-check: pkg/gen and openapi/ are up to date"
