#!/usr/bin/env bash
# Fails if a source, test, benchmark, build or CI file reaches outside the
# repository: a clone must build and pass its tests on its own, with no
# folder beside it (issue 51: the tests once read `../shared/fixtures`).
#
# 1. Names of folders beside the repository, or of this machine's paths,
#    are refused outright.
# 2. Every relative path literal ("../…", "..") must resolve to something
#    that exists inside the repository, from the file's own folder
#    (include_str!, include_bytes!, #[path], helm chart paths) or from its
#    crate's folder (env!("CARGO_MANIFEST_DIR"), Cargo.toml paths).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)
self=.ci/inside-repo.sh

mapfile -t files < <(git ls-files -- '*.rs' '*.toml' '*.sh' '*.py' 'Dockerfile' '.ci/*' | grep -vxF "$self")
failed=0

if grep -nE '\.\./shared|shared/fixtures|SLUICE_FIXTURES|/work/' -- "${files[@]}"; then
    echo "inside-repo: the lines above name a folder outside the repository; put what they read in the repository (recorded payloads: tests/fixtures/)" >&2
    failed=1
fi

# The folder of the nearest Cargo.toml at or above a folder (the repository
# root if none).
crate_dir() {
    local dir=$1
    while [ "$dir" != "$root" ] && [ ! -f "$dir/Cargo.toml" ]; do
        dir=$(dirname "$dir")
    done
    printf '%s\n' "$dir"
}

# Whether `rel`, from folder `base`, names an existing path inside the
# repository.
inside() {
    local resolved
    resolved=$(realpath -m -- "$1/$2")
    case "$resolved" in
        "$root" | "$root"/*) [ -e "$resolved" ] ;;
        *) return 1 ;;
    esac
}

while IFS=: read -r file line literal; do
    rel=${literal//\"/}
    rel=${rel#/}
    dir="$root/$(dirname "$file")"
    if ! inside "$dir" "$rel" && ! inside "$(crate_dir "$dir")" "$rel"; then
        echo "$file:$line: $literal does not name a path inside the repository, from the file's folder or its crate's" >&2
        failed=1
    fi
done < <(grep -noE '"/?(\.\./)+[^"]*"|"\.\."' -- "${files[@]}" || true)

if [ "$failed" != 0 ]; then
    exit 1
fi
echo "inside-repo: ${#files[@]} files checked; none reaches outside the repository"
