
g=$(git -C "$1" rev-parse --absolute-git-dir) || exit 3
printf '%s\n' "$g"
git -C "$1" rev-parse --verify -q HEAD || echo
git -C "$1" symbolic-ref -q HEAD || echo
printf '@@probe\n'; ls -1a "$g"
printf '@@unmerged\n'; git -C "$1" ls-files -u -z | head -c 200
printf '\n@@subs\n'; git -C "$1" submodule status 2>/dev/null
printf '@@dirty\n'; git -C "$1" submodule foreach --quiet 'test -z "$(git status --porcelain)" || echo "$sm_path"' 2>/dev/null
