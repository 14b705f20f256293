#!/bin/sh
# One Sentinel of the set, watching the master the other sentinels name (on the set's first
# start, the first pod). It asks for the password (requirepass), gives it to the other sentinels
# (sentinel-pass) and to Redis (auth-pass). A master is down after 5 s without an answer; two
# sentinels must agree, and a majority elect the one that promotes a replica.
set -eu
umask 077
password="$(cat "$PASSWORD_FILE")"
master="$(sh /etc/redis/find-master.sh)"
[ -n "$master" ] || master="$FIRST_MASTER"
cp /etc/redis/sentinel.conf /run/sentinel/sentinel.conf
cat >> /run/sentinel/sentinel.conf <<END
port $SENTINEL_PORT
sentinel announce-ip $SELF
requirepass "$password"
sentinel sentinel-pass $password
sentinel monitor $MASTER_NAME $master 2
sentinel auth-pass $MASTER_NAME $password
sentinel down-after-milliseconds $MASTER_NAME 5000
sentinel failover-timeout $MASTER_NAME 60000
sentinel parallel-syncs $MASTER_NAME 1
END
exec redis-server /run/sentinel/sentinel.conf --sentinel
