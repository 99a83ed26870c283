#!/usr/bin/env bash
# Installs the Redis programs that the tests drive, where they are missing:
# redis-cli and redis-benchmark (Debian's redis-tools) and redis-server
# (Debian's redis-server, for internal/difftest) and redis-rb (Debian's
# ruby-redis, with Ruby), with apt-get, and redis-py (the version below, from
# PyPI) in a virtual environment at bin/pyclients, where cmd/flint's tests
# look for it. Run again with all in place, it does
# nothing. `make clients` runs it, and CI runs that before `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS_PY=8.1.0
venv=bin/pyclients

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi

# apt_install installs Debian packages, reading the package lists first
# only if they do not have them (a fresh machine has none).
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get install -y -q "$@" >/dev/null 2>&1 ||
		{ $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "$@" >/dev/null; }
}

if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null ||
	! command -v redis-server >/dev/null; then
	apt_install redis-tools redis-server
	# Debian's package starts a redis-server service on port 6379 where an
	# init system runs. The tests start their own servers; stop it, and
	# keep it from starting at boot.
	$sudo systemctl disable --now redis-server >/dev/null 2>&1 ||
		$sudo service redis-server stop >/dev/null 2>&1 || true
fi
if ! ruby -e 'require "redis"' 2>/dev/null; then
	apt_install ruby-redis
fi
if ! "$venv/bin/python" -c "import redis, sys; sys.exit(redis.__version__ != '$REDIS_PY')" 2>/dev/null; then
	rm -rf "$venv"
	# Debian's python3 makes a virtual environment only with python3-venv.
	python3 -m venv "$venv" 2>/dev/null || { rm -rf "$venv" && apt_install python3-venv && python3 -m venv "$venv"; }
	"$venv/bin/pip" install -q --disable-pip-version-check "redis==$REDIS_PY"
fi
echo "clients: $(redis-cli --version); $(redis-server --version | cut -d' ' -f1-3); redis-py $("$venv/bin/python" -c 'import redis; print(redis.__version__)') in $venv; redis-rb $(ruby -e 'require "redis"; print Redis::VERSION')"
