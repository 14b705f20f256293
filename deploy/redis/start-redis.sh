#!/bin/sh
# One Redis of the set: a replica of the master the sentinels name. On the set's first start none
# names one: the first pod is the master and the others replicate it. Its port, password and role
# go in /run/redis/runtime.conf (redis.conf includes it), a file only this user reads.
set -eu
umask 077
password="$(cat "$PASSWORD_FILE")"
master="$(sh /etc/redis/find-master.sh)"
if [ -z "$master" ] && [ "$POD_NAME" != "$FIRST_POD" ]; then master="$FIRST_MASTER"; fi
{
  printf 'requirepass "%s"\nmasterauth "%s"\n' "$password" "$password"
  printf 'port %s\nreplica-announce-ip %s\n' "$REDIS_PORT" "$SELF"
  if [ -n "$master" ] && [ "$master" != "$SELF $REDIS_PORT" ]; then printf 'replicaof %s\n' "$master"; fi
} > /run/redis/runtime.conf
exec redis-server /etc/redis/redis.conf
