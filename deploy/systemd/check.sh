#!/usr/bin/env bash
# Checks deploy/systemd/switchyard.service as CI does: `systemd-analyze verify` (syntax, every key known, the
# commands executable) must pass with nothing to say, and `systemd-analyze security --offline` must rate its
# exposure at most 2.0 of 10 (the unit scores 1.4). Neither needs systemd running as PID 1.
#
#   deploy/systemd/check.sh [BINARY]     (default target/release/switchyard, else target/debug/switchyard)
#
# The unit runs /usr/local/bin/switchyard; the check reads a copy naming BINARY there instead, so it needs no
# install on the machine that runs it.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
UNIT="$ROOT/deploy/systemd/switchyard.service"
# In tenths of the 0-10 exposure scale.
THRESHOLD=20

need systemd-analyze "Debian: apt-get install systemd"
BINARY="${1:-}"
if [[ -z "$BINARY" ]]; then
    BINARY="$ROOT/target/release/switchyard"
    [[ -x "$BINARY" ]] || BINARY="$ROOT/target/debug/switchyard"
fi
[[ -x "$BINARY" ]] || fail "no switchyard binary at $BINARY (cargo build first)"
BINARY="$(realpath "$BINARY")"

DIR="$(mktemp -d "${TMPDIR:-/tmp}/switchyard-unit.XXXXXX")"
trap 'rm -rf "$DIR"' EXIT
sed "s|/usr/local/bin/switchyard|$BINARY|g" "$UNIT" >"$DIR/switchyard.service"

# `verify` reports an unknown key or a bad value on stderr yet exits 0: any word from it is a failure.
said="$(systemd-analyze verify "$DIR/switchyard.service" 2>&1)" || fail "systemd-analyze verify: $said"
[[ -z "$said" ]] || fail "systemd-analyze verify: $said"
systemd-analyze security --offline=yes --threshold="$THRESHOLD" "$DIR/switchyard.service" >"$DIR/security.txt" 2>&1 ||
    fail "systemd-analyze security rates the unit above 2.0: $(tail -n 1 "$DIR/security.txt")"
printf 'systemd unit verified; %s\n' "$(grep -o 'Overall exposure level.*' "$DIR/security.txt")"
