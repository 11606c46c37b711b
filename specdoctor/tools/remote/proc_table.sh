for d in /proc/[0-9]*; do printf '%s\0%s\0' "$d/stat" "$d/cmdline"; done | xargs -0 grep -a -s -z -H ''; true
