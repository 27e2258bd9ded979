#!/usr/bin/env bash
# compare.sh: the gateway's cost per call against the floors it is judged by
# (issue 7), measured in one run on loopback.
#
#   bash bench/compare.sh [-o FILE.json]      # from the repo root; ~5 minutes
#   QUICK=1 bash bench/compare.sh             # smoke run, ~1 minute
#
# Targets, each a fresh process on 127.0.0.1 and a free port:
#   direct     bench/upstream itself (go-sdk server, echo tool)
#   proxy      bench/proxy: a bare httputil.ReverseProxy in front of it
#   gw-memory  bin/gateway, memory session store, one upstream "up"
#   gw-redis   bin/gateway, Redis session store (REDIS_ADDR, default
#              127.0.0.1:6379, under a key prefix of its own); left out,
#              with a warning, when Redis does not answer PING
#   gw-large   with LARGE_CONFIG=1, call scenarios only: gw-memory with
#              1,000 tenants and 50 upstreams in its config (the caller's
#              tenant sees three); the summary ends with its ratios to
#              gw-memory (issue 7: within 10%)
#   gw-mem-rules
#              with RULES=1, call scenarios only: gw-memory whose tenant
#              also has 30 policy rules (docs/policy.md): 20 pattern rules
#              on other tools and 10 CEL rules on the one called whose
#              conditions never hold, half list rules, half call rules, so
#              that every call tries them all; the summary ends with its
#              ratios to gw-memory (issue 29: within 5%)
#   gw-mem-guards
#              with GUARDS=1, call scenarios only: gw-memory whose upstream
#              has the built-in credential and personal-data guards on
#              results (docs/guards.md); the echo text is then prose (an
#              issue tracker's, with numbers, URLs and dates, no findings)
#              for every target; the summary ends with its ratios to
#              gw-memory (issue 30: within 10% at 10 KB)
#   gw-mem-openapi
#              with OPENAPI=1, call scenarios only: gw-memory whose upstream
#              "up" is bench/upstream's REST echo API served as an openapi
#              upstream (docs/openapi-upstreams.md): its echo tool is the
#              operation POST /rest/echo, whose JSON body {"text": ...} is
#              the tool's argument "body", answered as text/plain; the
#              summary ends with its ratios to gw-memory (issue 32)
#   gw-mem-budgets, gw-redis-budgets
#              with BUDGETS=1, call scenarios only: gw-memory and gw-redis
#              with budgets that apply to every call and never refuse one
#              (a per-principal rate limit of every request, a per-tool
#              one, a daily quota, a concurrency bound and a circuit
#              breaker on the upstream); the summary ends with their ratios
#              to gw-memory and gw-redis (issue 18: within 5% in memory,
#              one Redis round trip with Redis)
# Scenarios (name:clients:mode:payload): c1:1:call:100, c32:32:call:100,
# c1-10k:1:call:10240, c32-10k:32:call:10240, and list:1:list:0, where
# direct and proxy list one upstream with 1000 tools and the gateways list
# 20 upstreams of 50 tools (1000 too), from their cache.
#
# Each scenario runs ROUNDS rounds; a round runs every target once, for
# WARMUP then DURATION, starting with a different target each round, so that
# drift on a shared machine spreads over all of them. The summary gives the
# medians over rounds and the ratios issue 7 sets targets for: only ratios
# measured in the same run mean anything here.
#
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [4s]  WARMUP [0.5s]   QUICK=1: 2, 1s, 0.25s
#   SCENARIOS   space-separated name:clients:mode:payload, as above
#   REDIS_ADDR [127.0.0.1:6379]
#   UPSTREAM_JSON=1   upstreams answer application/json instead of SSE
#   POLICY [1]        give the callers' tenant, default, a few policy rules
#   AUTH [bearer]     bearer: the gateways trust bench/issuer (a development
#                     issuer on loopback) and mcpload sends its token, which
#                     the gateways verify once and then take from their
#                     cache; anonymous: auth.anonymous, no token
#   GW_LOG_LEVEL [info]
#   LARGE_CONFIG=1    add the gw-large target (configuration size)
#   BUDGETS=1         add the gw-*-budgets targets (the cost of budgets)
#   RULES=1           add the gw-mem-rules target (the cost of policy rules)
#   GUARDS=1          add the gw-mem-guards target (the cost of content guards)
#   OPENAPI=1         add the gw-mem-openapi target (a REST operation as a tool)
#   FILL [x]          the echo text: x (one letter) or prose; prose with GUARDS=1
#   KEEP=1            keep the work directory (configs, logs, runs.jsonl)
#
# It stops every process it started, by PID, however it exits.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

out=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	-o) out="${2:?-o needs a file}"; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
done

if [[ ! -f go.mod || ! -d cmd/gateway || ! -d bench ]]; then
	echo "compare.sh: run it from the repository root" >&2
	exit 2
fi

if [[ "${QUICK:-}" == 1 ]]; then
	ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-1s} WARMUP=${WARMUP:-0.25s}
fi
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-0.5s}
SCENARIOS=${SCENARIOS:-"c1:1:call:100 c32:32:call:100 c1-10k:1:call:10240 c32-10k:32:call:10240 list:1:list:0"}
REDIS_ADDR=${REDIS_ADDR:-127.0.0.1:6379}
POLICY=${POLICY:-1}
LARGE_CONFIG=${LARGE_CONFIG:-0}
BUDGETS=${BUDGETS:-0}
RULES=${RULES:-0}
GUARDS=${GUARDS:-0}
OPENAPI=${OPENAPI:-0}
if [[ $GUARDS == 1 ]]; then FILL=${FILL:-prose}; fi
FILL=${FILL:-x}
GW_LOG_LEVEL=${GW_LOG_LEVEL:-info}
AUTH=${AUTH:-bearer}
if [[ $AUTH != bearer && $AUTH != anonymous ]]; then
	echo "compare.sh: AUTH must be bearer or anonymous, got $AUTH" >&2
	exit 2
fi
# The list scenario: the gateways aggregate LIST_UPSTREAMS upstreams of
# LIST_TOOLS tools each; direct and proxy serve as many from one upstream.
LIST_UPSTREAMS=20
LIST_TOOLS=50

work=$(mktemp -d "${TMPDIR:-/tmp}/mcpbench.XXXXXX")
pids=()
redis_prefix="mcpbench:$$:$(date +%s):"
have_redis=0

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [[ $have_redis == 1 ]] && command -v redis-cli >/dev/null; then
		# Sessions expire on their own (idle_ttl); delete them now anyway.
		redis-cli -h "${REDIS_ADDR%:*}" -p "${REDIS_ADDR##*:}" --scan --pattern "${redis_prefix}*" 2>/dev/null |
			xargs -r redis-cli -h "${REDIS_ADDR%:*}" -p "${REDIS_ADDR##*:}" del >/dev/null 2>&1 || true
	fi
	if [[ "${KEEP:-}" == 1 ]]; then
		echo "compare.sh: kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM # runs the EXIT trap

log() { echo "compare.sh: $*" >&2; }

# --- build -----------------------------------------------------------------
log "building into bin/"
mkdir -p bin
go build -o bin/gateway ./cmd/gateway
go build -o bin/mcpload ./cmd/mcpload
go build -o bin/bench-upstream ./bench/upstream
go build -o bin/bench-proxy ./bench/proxy
go build -o bin/bench-summarize ./bench/summarize
go build -o bin/bench-issuer ./bench/issuer

# --- processes -------------------------------------------------------------

# start NAME CMD...: runs CMD in the background, logging to $work/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
	eval "pid_$name=$!"
}

# await NAME PATTERN: waits for PATTERN (grep -oE) in NAME's log and prints
# the first match; fails if the process exits or 15s pass.
await() {
	local name=$1 pattern=$2 pidvar="pid_$1" match
	for _ in $(seq 150); do
		if match=$(grep -oE "$pattern" "$work/$name.log" 2>/dev/null | head -n1) && [[ -n $match ]]; then
			echo "$match"
			return 0
		fi
		if ! kill -0 "${!pidvar}" 2>/dev/null; then
			log "$name exited:"
			cat "$work/$name.log" >&2
			return 1
		fi
		sleep 0.1
	done
	log "$name did not start within 15s:"
	cat "$work/$name.log" >&2
	return 1
}

# upstream NAME ARGS...: starts bench/upstream and sets NAME_url to its
# origin (http://127.0.0.1:PORT).
upstream() {
	local name=$1 addr
	shift
	local args=("$@")
	if [[ "${UPSTREAM_JSON:-}" == 1 ]]; then args+=(-json); fi
	start "$name" bin/bench-upstream -addr 127.0.0.1:0 "${args[@]}"
	addr=$(await "$name" 'http://127\.0\.0\.1:[0-9]+')
	eval "${name}_url=$addr"
}

# proxy NAME ORIGIN: starts bench/proxy to ORIGIN and sets NAME_url.
proxy() {
	local name=$1 addr
	start "$name" bin/bench-proxy -addr 127.0.0.1:0 -upstream "$2"
	addr=$(await "$name" 'http://127\.0\.0\.1:[0-9]+')
	eval "${name}_url=$addr"
}

# issuer: starts bench/issuer, sets issuer_url to its origin and
# bench_token to its token, which mcpload gets in MCPLOAD_TOKEN (out of
# ps) for the gateway targets only.
issuer() {
	local addr
	start issuer bin/bench-issuer -addr 127.0.0.1:0 -token-file "$work/token" -audience mcpbench
	# It prints this line once the token file is written.
	addr=$(await issuer 'listening on http://127\.0\.0\.1:[0-9]+')
	issuer_url=${addr#listening on }
	bench_token=$(<"$work/token")
}

# gwpublic: the server.public_url line of a gateway config, which trusting
# an issuer requires (blank with AUTH=anonymous). The URL is nominal: the
# port is picked at start, and nothing the benchmark does depends on it
# (the tokens' audience is set explicitly).
gwpublic() {
	if [[ $AUTH == bearer ]]; then echo '  public_url: "http://127.0.0.1/mcp"'; fi
}

# gwauth: the auth section of a gateway config, for AUTH.
gwauth() {
	if [[ $AUTH == anonymous ]]; then
		printf 'auth:\n  anonymous: true\n'
		return
	fi
	cat <<-EOF
		auth:
		  issuers:
		    - name: bench
		      issuer_url: "$issuer_url"
		      jwks_url: "$issuer_url/jwks"
		      tenant_claim: tenant
		      audiences: ["mcpbench"]
		      algorithms: ["ES256"]
	EOF
}

# gateway NAME CONFIG: validates CONFIG, starts bin/gateway with it and
# sets NAME_url to its origin.
gateway() {
	local name=$1 config=$2 addr
	if ! bin/gateway validate -config "$config" >"$work/$name.validate" 2>&1; then
		log "$config does not validate:"
		cat "$work/$name.validate" >&2
		return 1
	fi
	start "$name" bin/gateway serve -config "$config" -log-format json -log-level "$GW_LOG_LEVEL"
	addr=$(await "$name" '"msg":"listening on http://127\.0\.0\.1:[0-9]+')
	eval "${name}_url=${addr#*listening on }"
}

# redis_ping: whether Redis at REDIS_ADDR answers PING (pure bash).
redis_ping() {
	(
		exec 3<>"/dev/tcp/${REDIS_ADDR%:*}/${REDIS_ADDR##*:}" || exit 1
		printf 'PING\r\n' >&3
		IFS= read -r -t 2 reply <&3 || exit 1
		[[ $reply == +PONG* ]]
	) 2>/dev/null
}

# gwserver STORE: the server and sessions sections of a gateway config.
gwserver() {
	cat <<-EOF
		server:
		  listen: "127.0.0.1:0"
		  admin_listen: "127.0.0.1:0"
		$(gwpublic)
		  # Long enough that the list scenario is served from the cache
		  # from its first request to its last.
		  list_cache_ttl: 10m
		sessions:
		  store: $1
		  idle_ttl: 10m
	EOF
}

# gwrules: with POLICY=1, the rules a tenant has on each upstream it sees,
# as the lines that follow the name in its tenants[].upstreams[] item.
gwrules() {
	if [[ $POLICY == 1 ]]; then
		printf '        tools: { allow: ["echo", "t*", "get_*"], deny: ["delete_*", "admin_*"] }\n'
		printf '        required_scopes: { "admin_reset": ["mcp:admin"] }\n'
	fi
}

# gwconfig FILE STORE UPSTREAMS...: writes a gateway config; each upstream
# is NAME=URL.
gwconfig() {
	local file=$1 store=$2 u
	shift 2
	{
		echo "# Written by bench/compare.sh."
		gwserver "$store"
		if [[ $store == redis ]]; then
			cat <<-EOF
				  redis:
				    addrs: ["$REDIS_ADDR"]
				    key_prefix: "$redis_prefix"
			EOF
		fi
		echo "upstreams:"
		for u in "$@"; do
			if [[ ${WITH_OPENAPI:-0} == 1 ]]; then
				printf '  - name: %s\n    openapi: { document: "%s/rest/openapi.json" }\n' "${u%%=*}" "${u#*=}"
			else
				printf '  - name: %s\n    url: "%s/mcp"\n' "${u%%=*}" "${u#*=}"
			fi
			if [[ ${WITH_BUDGETS:-0} == 1 ]]; then
				printf '    concurrency: { max_in_flight: 1000, per_tenant: 1000 }\n'
				printf '    circuit_breaker: { failures: 1000 }\n'
			fi
			if [[ ${WITH_GUARDS:-0} == 1 ]]; then
				# The built-in detectors on every result: the echo of
				# prose holds nothing they find, so every result is
				# inspected whole and passes unchanged.
				printf '    guards:\n      - { detect: [credentials, personal_data], phases: [results] }\n'
			fi
		done
		if [[ ${WITH_BUDGETS:-0} == 1 ]]; then
			# Every call passes each of these; none ever refuses one.
			cat <<-EOF
				budgets:
				  rate_limits:
				    - { name: per-user, per: [principal], requests: 1000000 }
				    - { name: per-tool, per: [principal, tool], requests: 1000000 }
				  quotas:
				    - { name: daily, calls: 1000000000 }
			EOF
		fi
		# With AUTH=bearer (the default), every request carries the
		# token of bench/issuer, tenant "default", as the issue's targets
		# assume; with AUTH=anonymous every caller is the anonymous
		# principal of tenant "default".
		gwauth
		if [[ ${WITH_RULES:-0} == 1 ]]; then
			# 30 rules the caller's tenant tries on every call, none of
			# which applies: the per-call cost of rules.
			printf 'tenants:\n  - id: default\n    policy:\n'
			for i in $(seq 0 19); do
				printf '      - { phase: %s, match: { tools: ["other_%d_*"] }, effect: deny }\n' "$([[ $((i % 2)) == 0 ]] && echo list || echo call)" "$i"
			done
			for i in $(seq 0 9); do
				if [[ $((i % 2)) == 0 ]]; then
					printf '      - { phase: list, match: { tools: ["echo"] }, when: { cel: "principal.subject == \\"nobody-%d\\"" }, effect: deny }\n' "$i"
				else
					printf '      - { phase: call, match: { tools: ["echo"] }, when: { cel: "has(arguments.text) && arguments.text == \\"never-%d\\"" }, effect: deny }\n' "$i"
				fi
			done
			printf '    upstreams:\n'
			for u in "$@"; do
				printf '      - name: %s\n' "${u%%=*}"
				gwrules
			done
		elif [[ $POLICY == 1 ]]; then
			# A few rules per upstream, the shape of a real tenant's: the
			# policy decision is on the path of every list and call.
			# The issue's "1,000 tenants and 50 upstreams" is the gw-large
			# target (LARGE_CONFIG=1, gwconfig_large).
			printf 'tenants:\n  - id: default\n    upstreams:\n'
			for u in "$@"; do
				printf '      - name: %s\n' "${u%%=*}"
				gwrules
			done
		fi
	} >"$file"
}

# gwconfig_large FILE URL: writes the config of gw-large: the memory
# store, 50 upstreams all at URL ("up", the one called, and u01..u49), and
# 1,000 tenants: "default" (the caller's) sees up, u17 and u33,
# each of tenant-0001..tenant-0999 sees five upstreams; with POLICY=1 every
# tenant has gwconfig's rules (gwrules) on every upstream it sees.
gwconfig_large() {
	local file=$1 url=$2 i j u
	local names=(up)
	for i in $(seq -w 1 49); do names+=("u$i"); done
	{
		echo "# Written by bench/compare.sh (LARGE_CONFIG=1)."
		gwserver memory
		gwauth
		echo "upstreams:"
		for u in "${names[@]}"; do
			printf '  - name: %s\n    url: "%s/mcp"\n' "$u" "$url"
		done
		printf 'tenants:\n  - id: default\n    upstreams:\n'
		for u in up u17 u33; do
			printf '      - name: %s\n' "$u"
			gwrules
		done
		for i in $(seq 1 999); do
			printf '  - id: tenant-%04d\n    upstreams:\n' "$i"
			for j in 0 1 2 3 4; do
				printf '      - name: %s\n' "${names[$(((i * 7 + j * 11) % 50))]}"
				gwrules
			done
		done
	} >"$file"
}

# pair_summary TITLE A B: target B against target A, per call scenario: the
# median over rounds of each round's ratio of p50 latencies and of req/s.
# cputicks PID: the CPU time (user + system, in clock ticks) process PID
# has used so far, 0 if it cannot be read.
cputicks() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	stat=${stat##*) } # past the command name, which may hold spaces
	read -r -a f <<<"$stat"
	echo $((f[11] + f[12])) # utime, stime (fields 14 and 15)
}

# target_pid TARGET MODE: the PID of the process serving TARGET in a
# scenario of MODE (the one whose CPU per call is measured).
target_pid() {
	local var
	case "$1:$2" in
	direct:list) var=pid_uplist ;;
	proxy:list) var=pid_proxylist ;;
	direct:*) var=pid_up ;;
	*:list) var="pid_gwlist_${1#gw-}" ;;
	*) var="pid_${1//-/_}" ;;
	esac
	echo "${!var:-}"
}

# cpu_of SCENARIO TARGET ROUND: the CPU per call (µs) measured in a run.
cpu_of() {
	grep -F '"annotation":"cpu"' "$runs" | grep -F "\"scenario\":\"$1\"" | grep -F "\"target\":\"$2\"" |
		grep -F "\"round\":\"$3\"" | head -n1 | grep -oE '"cpu_us_per_call":[0-9.]+' | cut -d: -f2
}

pair_summary() {
	local title=$1 a=$2 b=$3 scen name clients mode payload round m l p50 rps cpu ca cb
	echo
	echo "$title"
	printf '%10s  %10s  %10s  %10s\n' scenario "p50 ratio" "req/s ratio" "CPU/call ratio"
	for scen in $SCENARIOS; do
		IFS=: read -r name clients mode payload <<<"$scen"
		if [[ $mode == list ]]; then continue; fi
		p50=() rps=() cpu=()
		for ((round = 1; round <= ROUNDS; round++)); do
			m=$(grep -F "\"scenario\":\"$name\"" "$runs" | grep -F "\"target\":\"$a\"" | grep -F "\"round\":\"$round\"" | grep -v annotation | head -n1) || true
			l=$(grep -F "\"scenario\":\"$name\"" "$runs" | grep -F "\"target\":\"$b\"" | grep -F "\"round\":\"$round\"" | grep -v annotation | head -n1) || true
			if [[ -z $m || -z $l ]]; then continue; fi
			p50+=("$(awk -v a="$(grep -oE '"p50":[0-9.]+' <<<"$l" | cut -d: -f2)" -v b="$(grep -oE '"p50":[0-9.]+' <<<"$m" | cut -d: -f2)" 'BEGIN { if (b > 0) printf "%.4f", a / b }')")
			rps+=("$(awk -v a="$(grep -oE '"rps":[0-9.]+' <<<"$l" | cut -d: -f2)" -v b="$(grep -oE '"rps":[0-9.]+' <<<"$m" | cut -d: -f2)" 'BEGIN { if (b > 0) printf "%.4f", a / b }')")
			ca=$(cpu_of "$name" "$a" "$round") cb=$(cpu_of "$name" "$b" "$round")
			if [[ -n $ca && -n $cb ]]; then
				cpu+=("$(awk -v a="$cb" -v b="$ca" 'BEGIN { if (b > 0) printf "%.4f", a / b }')")
			fi
		done
		printf '%10s  %10s  %10s  %10s\n' "$name" "$(median "${p50[@]}")" "$(median "${rps[@]}")" "$(median "${cpu[@]}")"
	done
}

# cpu_summary: each target's CPU per call of its own process (the hop's
# cost, without the load tool's and the upstream's), as a ratio to the
# bare proxy's, the median over rounds of each round's ratio.
cpu_summary() {
	local scen name clients mode payload round target r pc tc line
	echo
	echo "CPU per call of the target's process / the proxy's, median over rounds of each round's ratio:"
	line=$(printf '%10s' scenario)
	for target in "${targets[@]}"; do
		if [[ $target != direct && $target != proxy ]]; then line+=$(printf '  %14s' "$target"); fi
	done
	echo "$line"
	for scen in $SCENARIOS; do
		IFS=: read -r name clients mode payload <<<"$scen"
		line=$(printf '%10s' "$name")
		for target in "${targets[@]}"; do
			if [[ $target == direct || $target == proxy ]]; then continue; fi
			r=()
			for ((round = 1; round <= ROUNDS; round++)); do
				pc=$(cpu_of "$name" proxy "$round") tc=$(cpu_of "$name" "$target" "$round")
				if [[ -n $pc && -n $tc ]]; then
					r+=("$(awk -v a="$tc" -v b="$pc" 'BEGIN { if (b > 0) printf "%.4f", a / b }')")
				fi
			done
			line+=$(printf '  %14s' "$(median "${r[@]}")")
		done
		echo "$line"
	done
}

# median X...: the median of numbers, to two decimals; "-" for none.
median() {
	if [[ $# -eq 0 ]]; then
		echo -
		return
	fi
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f", m }'
}

log "work directory $work"
if redis_ping; then
	have_redis=1
else
	log "WARNING: no Redis answers PING at $REDIS_ADDR: gw-redis is left out"
fi

if [[ $AUTH == bearer ]]; then issuer; fi

# The call scenarios: one upstream, its proxy and two gateways.
upstream up
proxy proxy "$up_url"
gwconfig "$work/gw-memory.yaml" memory "up=$up_url"
gateway gw_memory "$work/gw-memory.yaml"
if [[ $have_redis == 1 ]]; then
	gwconfig "$work/gw-redis.yaml" redis "up=$up_url"
	gateway gw_redis "$work/gw-redis.yaml"
fi
if [[ $LARGE_CONFIG == 1 ]]; then
	gwconfig_large "$work/gw-large.yaml" "$up_url"
	gateway gw_large "$work/gw-large.yaml"
fi
if [[ $RULES == 1 ]]; then
	WITH_RULES=1 gwconfig "$work/gw-mem-rules.yaml" memory "up=$up_url"
	gateway gw_mem_rules "$work/gw-mem-rules.yaml"
fi
if [[ $GUARDS == 1 ]]; then
	WITH_GUARDS=1 gwconfig "$work/gw-mem-guards.yaml" memory "up=$up_url"
	gateway gw_mem_guards "$work/gw-mem-guards.yaml"
fi
if [[ $OPENAPI == 1 ]]; then
	WITH_OPENAPI=1 gwconfig "$work/gw-mem-openapi.yaml" memory "up=$up_url"
	gateway gw_mem_openapi "$work/gw-mem-openapi.yaml"
fi
if [[ $BUDGETS == 1 ]]; then
	WITH_BUDGETS=1 gwconfig "$work/gw-mem-budgets.yaml" memory "up=$up_url"
	gateway gw_mem_budgets "$work/gw-mem-budgets.yaml"
	if [[ $have_redis == 1 ]]; then
		WITH_BUDGETS=1 gwconfig "$work/gw-redis-budgets.yaml" redis "up=$up_url"
		gateway gw_redis_budgets "$work/gw-redis-budgets.yaml"
	fi
fi

# The list scenario: 1000 tools from one upstream (direct, proxy), or from
# 20 upstreams of 50 (the gateways; the same server under 20 names).
if [[ " $SCENARIOS " == *:list:* ]]; then
	upstream uplist -tools $((LIST_UPSTREAMS * LIST_TOOLS - 1))
	proxy proxylist "$uplist_url"
	upstream upagg -tools $((LIST_TOOLS - 1)) -count
	aggs=()
	for i in $(seq -w 1 $LIST_UPSTREAMS); do aggs+=("u$i=$upagg_url"); done
	gwconfig "$work/gwlist-memory.yaml" memory "${aggs[@]}"
	gateway gwlist_memory "$work/gwlist-memory.yaml"
	if [[ $have_redis == 1 ]]; then
		gwconfig "$work/gwlist-redis.yaml" redis "${aggs[@]}"
		gateway gwlist_redis "$work/gwlist-redis.yaml"
	fi
fi

# --- runs ------------------------------------------------------------------
targets=(direct proxy gw-memory)
if [[ $have_redis == 1 ]]; then targets+=(gw-redis); fi
if [[ $LARGE_CONFIG == 1 ]]; then targets+=(gw-large); fi
if [[ $RULES == 1 ]]; then targets+=(gw-mem-rules); fi
if [[ $GUARDS == 1 ]]; then targets+=(gw-mem-guards); fi
if [[ $OPENAPI == 1 ]]; then targets+=(gw-mem-openapi); fi
if [[ $BUDGETS == 1 ]]; then
	targets+=(gw-mem-budgets)
	if [[ $have_redis == 1 ]]; then targets+=(gw-redis-budgets); fi
fi
runs="$work/runs.jsonl"
: >"$runs"

# endpoint TARGET MODE: the target's MCP endpoint for a scenario's mode.
endpoint() {
	case "$1:$2" in
	direct:list) echo "$uplist_url/mcp" ;;
	proxy:list) echo "$proxylist_url/mcp" ;;
	gw-memory:list) echo "$gwlist_memory_url/mcp" ;;
	gw-redis:list) echo "$gwlist_redis_url/mcp" ;;
	direct:*) echo "$up_url/mcp" ;;
	proxy:*) echo "$proxy_url/mcp" ;;
	gw-memory:*) echo "$gw_memory_url/mcp" ;;
	gw-redis:*) echo "$gw_redis_url/mcp" ;;
	gw-large:*) echo "$gw_large_url/mcp" ;;
	gw-mem-rules:*) echo "$gw_mem_rules_url/mcp" ;;
	gw-mem-guards:*) echo "$gw_mem_guards_url/mcp" ;;
	gw-mem-openapi:*) echo "$gw_mem_openapi_url/mcp" ;;
	gw-mem-budgets:*) echo "$gw_mem_budgets_url/mcp" ;;
	gw-redis-budgets:*) echo "$gw_redis_budgets_url/mcp" ;;
	esac
}

# upstream_lists: tools/list requests the list gateways' upstream has had.
upstream_lists() {
	local n
	n=$(curl -fsS "$upagg_url/stats" 2>/dev/null | grep -oE '"tools/list":[0-9]+' | cut -d: -f2) || true
	echo "${n:-0}"
}

nscen=$(wc -w <<<"$SCENARIOS")
total=$((nscen * ROUNDS * ${#targets[@]}))
if [[ " $SCENARIOS " == *:list:* ]]; then
	# gw-large and the budget targets run the call scenarios only.
	for target in "${targets[@]}"; do
		case $target in gw-large | *-budgets | *-rules | *-guards | *-openapi) total=$((total - ROUNDS)) ;; esac
	done
fi
n=0
failed=0
log "$nscen scenarios x $ROUNDS rounds x ${#targets[@]} targets, ${WARMUP} + ${DURATION} each"
for scen in $SCENARIOS; do
	IFS=: read -r name clients mode payload <<<"$scen"
	for ((round = 1; round <= ROUNDS; round++)); do
		for ((i = 0; i < ${#targets[@]}; i++)); do
			target=${targets[$(((i + round - 1) % ${#targets[@]}))]}
			if [[ ($target == gw-large || $target == *-budgets || $target == *-rules || $target == *-guards || $target == *-openapi) && $mode == list ]]; then continue; fi
			n=$((n + 1))
			tool=echo
			if [[ $target == gw-* ]]; then tool=up__echo; fi
			args=(-url "$(endpoint "$target" "$mode")" -c "$clients" -d "$DURATION" -warmup "$WARMUP"
				-mode "$mode" -tool "$tool" -payload "$payload" -fill "$FILL" -json
				-tag "scenario=$name" -tag "target=$target" -tag "round=$round")
			if [[ $mode == list ]]; then args+=(-expect-tools $((LIST_UPSTREAMS * LIST_TOOLS))); fi
			if [[ $target == *-openapi ]]; then args+=(-body-arg body); fi
			counting=0
			if [[ $mode == list && $target == gw-* ]] && command -v curl >/dev/null; then
				counting=1
				before=$(upstream_lists)
			fi
			token=
			if [[ $target == gw-* ]]; then token=${bench_token:-}; fi
			rc=0
			tpid=$(target_pid "$target" "$mode")
			t0=$(cputicks "${tpid:-0}")
			line=$(MCPLOAD_TOKEN=$token bin/mcpload "${args[@]}" 2>>"$work/mcpload.log") || rc=$?
			t1=$(cputicks "${tpid:-0}")
			if [[ -z $line ]]; then
				log "[$n/$total] $name $target round $round: mcpload failed (exit $rc):"
				tail -n 3 "$work/mcpload.log" >&2
				failed=$((failed + 1))
				continue
			fi
			echo "$line" >>"$runs"
			# CPU per call of the target's process: its CPU time over the
			# whole run (warm-up included) divided by the requests the run
			# made, the measured ones scaled by (warm-up + duration) /
			# duration.
			reqs=$(grep -oE '"requests":[0-9]+' <<<"$line" | cut -d: -f2)
			if [[ -n $tpid && $t1 -gt $t0 && ${reqs:-0} -gt 0 ]]; then
				awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$reqs" -v w="${WARMUP%s}" -v d="${DURATION%s}" \
					-v s="$name" -v tg="$target" -v r="$round" \
					'BEGIN { printf "{\"annotation\":\"cpu\",\"cpu_us_per_call\":%.1f,\"tags\":{\"scenario\":\"%s\",\"target\":\"%s\",\"round\":\"%d\"}}\n", t * 1e6 / hz / (n * (w + d) / d), s, tg, r }' >>"$runs"
			fi
			if [[ $counting == 1 ]]; then
				after=$(upstream_lists)
				printf '{"annotation":"upstream","upstream_tools_list":%d,"tags":{"scenario":"%s","target":"%s","round":"%d"}}\n' \
					$((after - before)) "$name" "$target" "$round" >>"$runs"
			fi
			rps=$(grep -oE '"rps":[0-9.]+' <<<"$line" | cut -d: -f2)
			p50=$(grep -oE '"p50":[0-9.]+' <<<"$line" | cut -d: -f2)
			errs=$(grep -oE '"errors":[0-9]+' <<<"$line" | cut -d: -f2)
			printf 'compare.sh: [%d/%d] %-8s %-9s round %d: %8.0f req/s, p50 %7.0fµs, %s errors\n' \
				"$n" "$total" "$name" "$target" "$round" "$rps" "$p50" "$errs" >&2
			if [[ $errs != 0 ]]; then
				grep -oE '"error_samples":\{[^}]*\}' <<<"$line" | head -c 400 >&2 || true
				echo >&2
			fi
		done
	done
done

# --- summary ---------------------------------------------------------------
meta=(-meta "rounds=$ROUNDS" -meta "duration=$DURATION" -meta "warmup=$WARMUP"
	-meta "cpus=$(nproc 2>/dev/null || echo '?')" -meta "go=$(go env GOVERSION)"
	-meta "commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo '+dirty')"
	-meta "upstream=$([[ "${UPSTREAM_JSON:-}" == 1 ]] && echo json || echo sse)"
	-meta "policy=$POLICY" -meta "auth=$AUTH" -meta "redis=$have_redis" -meta "large_config=$LARGE_CONFIG" -meta "budgets=$BUDGETS" -meta "rules=$RULES" -meta "guards=$GUARDS" -meta "openapi=$OPENAPI" -meta "fill=$FILL")
sumargs=("${meta[@]}")
if [[ -n $out ]]; then sumargs+=(-o "$out"); fi
echo
bin/bench-summarize "${sumargs[@]}" "$runs"
cpu_summary
if [[ $LARGE_CONFIG == 1 ]]; then
	pair_summary "configuration size: gw-large (1,000 tenants, 50 upstreams) / gw-memory (1 tenant, 1 upstream),
median over rounds of each round's ratio (issue 7: per-call figures within 10%):" gw-memory gw-large
fi
if [[ $RULES == 1 ]]; then
	pair_summary "policy rules: gw-mem-rules (30 rules tried on every call) / gw-memory, median over rounds of each round's ratio (issue 29: within 5%):" gw-memory gw-mem-rules
fi
if [[ $GUARDS == 1 ]]; then
	pair_summary "content guards: gw-mem-guards (credential and personal-data detectors on every result) / gw-memory, median over rounds of each round's ratio (issue 30: within 10% at 10 KB):" gw-memory gw-mem-guards
fi
if [[ $OPENAPI == 1 ]]; then
	pair_summary "OpenAPI upstream: gw-mem-openapi (the echo tool is a REST operation) / gw-memory (an MCP upstream's echo tool), median over rounds of each round's ratio (issue 32):" gw-memory gw-mem-openapi
fi
if [[ $BUDGETS == 1 ]]; then
	pair_summary "budgets: gw-mem-budgets / gw-memory, median over rounds of each round's ratio (issue 18: within 5%):" gw-memory gw-mem-budgets
	if [[ $have_redis == 1 ]]; then
		pair_summary "budgets: gw-redis-budgets / gw-redis, median over rounds of each round's ratio:" gw-redis gw-redis-budgets
	fi
fi
if [[ -n $out ]]; then log "wrote $out"; fi
if [[ $failed -gt 0 ]]; then
	log "$failed runs failed"
	exit 1
fi
