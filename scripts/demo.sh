#!/usr/bin/env bash
# A walk through the embedded default with the CLI: versions, delete
# markers, undelete and time travel, on the data directory given.
set -euo pipefail
bin=${1:-bin/stratafs}
dir=${2:-./stratafs-data}
s() { echo "\$ stratafs $*"; "$bin" --data-dir "$dir" "$@"; }

"$bin" --data-dir "$dir" bucket create demo 2>/dev/null || true
s bucket versioning demo enabled
s bucket ls
echo "first draft" | s put demo/notes/todo.txt -
sleep 1
before=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
echo "second draft" | s put demo/notes/todo.txt -
s put demo/README.md README.md
s ls demo
s ls demo/notes/
s get demo/notes/todo.txt
s get demo/notes/todo.txt --as-of "$before"
s rm demo/notes/todo.txt
s ls demo --recursive
s ls demo --versions --recursive
marker=$("$bin" --data-dir "$dir" ls demo/notes/ --versions | awk '$4 == "deleted,latest" {print $3; exit}')
s rm demo/notes/todo.txt --version "$marker"
s get demo/notes/todo.txt
echo
echo "Data lives in $dir (meta.db + chunks/). Run \`$bin --help\` for every command."
