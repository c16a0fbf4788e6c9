#!/usr/bin/env bash
# Rebuilds static/vendor/plotly-partial-<version>.min.js from the pinned npm packages.
# Installs into a throw-away work directory (WORKDIR=... to keep/reuse one); nothing is installed here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="$(node -p "require('$here/package.json').dependencies['plotly.js']")"
out="${OUT:-$root/static/vendor/plotly-partial-$version.min.js}"

if [[ -n "${WORKDIR:-}" ]]; then
    work="$WORKDIR"; mkdir -p "$work"
else
    work="$(mktemp -d "${TMPDIR:-/tmp}/plotly-bundle.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
fi

cp "$here/package.json" "$here/index.js" "$here/build.mjs" "$work/"
if [[ -f "$here/package-lock.json" ]]; then
    cp "$here/package-lock.json" "$work/"
    (cd "$work" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
else
    (cd "$work" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error)
    cp "$work/package-lock.json" "$here/package-lock.json"
    echo "wrote $here/package-lock.json"
fi

(cd "$work" && node build.mjs "$out")
ls -l "$out"
