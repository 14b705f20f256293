#!/bin/sh
# Prints "HOST PORT" of the master, as most sentinels that answer name it (on a tie, one that is
# not this pod: a sentinel that has not heard of a failover yet still names the old master);
# nothing when none does (the set's first start, or every sentinel away). The password reaches
# redis-cli in its environment (REDISCLI_AUTH), never in argv.
answers=""
for sentinel in $SENTINELS; do
  reply="$(REDISCLI_AUTH="$(cat "$PASSWORD_FILE")" timeout 5 redis-cli --no-auth-warning --raw -h "${sentinel%:*}" -p "${sentinel##*:}" SENTINEL get-master-addr-by-name "$MASTER_NAME" 2>/dev/null)" || continue
  # shellcheck disable=SC2086 # split on purpose: two lines, host and port
  set -- $reply
  if [ "$#" -eq 2 ]; then answers="$answers$1 $2
"; fi
done
printf '%s' "$answers" | sort | uniq -c | awk -v self="$SELF $REDIS_PORT" '
  { name = $2 " " $3; score = 2 * $1 + (name != self) }
  score > best { best = score; master = name }
  END { if (master != "") print master }'
