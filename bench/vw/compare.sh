#!/usr/bin/env bash
# Side-by-side progressive (predict, then learn) accuracy of streamlearn and
# Vowpal Wabbit on the same files in the same order. Prints a markdown table.
#
#   VW=/path/to/vw DATA=/path/to/shared/data bench/vw/compare.sh
#
# VW   the vw binary (default: `vw` on PATH). DATA: the real data sets
# (default: shared/data next to the repo). Either absent: skip, exit 0.
# REPEAT (default 3): runs of each tool per set; the fastest wall time is shown.
# Needs go, perl, awk, gzip. Takes well under a minute on 2 cores.
set -euo pipefail
shopt -s inherit_errexit

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DATA=${DATA:-$repo/../shared/data}
VW=${VW:-$(command -v vw || true)}
REPEAT=${REPEAT:-3}

if [[ -z $VW || ! -x $VW ]]; then
  echo "skip: no Vowpal Wabbit binary (set VW=/path/to/vw)"; exit 0
fi
if [[ ! -d $DATA ]]; then
  echo "skip: no data directory $DATA (set DATA=...)"; exit 0
fi
for tool in go perl awk gzip; do
  command -v "$tool" >/dev/null || { echo "skip: $tool not found"; exit 0; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$repo" && go build -o "$tmp/streamlearn" ./cmd/streamlearn)
SL=$tmp/streamlearn

# w8a's file is sorted by label: shuffle it once exactly as the repo's Go
# tests do (internal/pipeline, shuffledLines: math/rand/v2 PCG(1, 1) over the
# lines), so streamlearn's figure is the test's and VW reads the same order.
cat >"$tmp/shuffle.go" <<'EOF'
package main

import (
	"math/rand/v2"
	"os"
	"strings"
)

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	r := rand.New(rand.NewPCG(1, 1))
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	if err := os.WriteFile(os.Args[2], []byte(strings.Join(lines, "")), 0o644); err != nil {
		panic(err)
	}
}
EOF
(cd "$tmp" && go run shuffle.go "$DATA/w8a/w8a" "$tmp/w8a.shuffled")

# LIBSVM "y i:v ..." -> VW "±1 | i:v ..." (numeric names index directly in VW,
# as in streamlearn: slot i mod 2^18). Empty lines, which streamlearn skips, go.
libsvm2vw() { <"$1" awk 'NF { y = ($1 > 0) ? 1 : -1; $1 = ""; print y " |" $0 }'; }

# SMS "ham|spam<TAB>text", tokenized as streamlearn's text features
# (internal/event/text.go): maximal runs of Unicode letters and digits,
# lower-cased; with ngrams: 2 also each pair of consecutive tokens.
# sms2vw counts: each distinct word or bigram once, valued by its count, the
#   vector streamlearn learns from.
# sms2vw_ngram: the words once per occurrence, bigrams left to `vw --ngram 2`
#   (VW's usual text setup; VW treats a repeated feature differently from one
#   of value 2 in its normalized update).
sms_tokens='chomp; my ($l, $t) = split /\t/, $_, 2; $t //= "";
  my @t = map { lc } ($t =~ /[\p{L}\p{Nd}]+/g); my $y = $l eq "spam" ? "1" : "-1";'
sms2vw() {
  perl -CSD -ne "$sms_tokens"' my (%c, @o);
    for my $i (0 .. $#t) { for my $f ($t[$i], ($i < $#t ? "$t[$i]_$t[$i+1]" : ())) { push @o, $f unless $c{$f}++ } }
    print $y, " |", (map { " $_:$c{$_}" } @o), "\n";' "$1"
}
sms2vw_ngram() { perl -CSD -ne "$sms_tokens"' print $y, " | ", join(" ", @t), "\n";' "$1"; }

now() { date +%s.%N; }
# best_time CMD...: runs CMD REPEAT times (stdout+stderr to $tmp/out), prints the fastest wall time.
best_time() {
  local best="" t0 t1 d
  for ((r = 0; r < REPEAT; r++)); do
    t0=$(now)
    "$@" >"$tmp/out" 2>&1 || { echo "failed: $*" >&2; cat "$tmp/out" >&2; return 1; }
    t1=$(now)
    d=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    if [[ -z $best ]] || awk -v d="$d" -v b="$best" 'BEGIN { exit !(d < b) }'; then best=$d; fi
  done
  echo "$best"
}

# sl NAME INPUT LEARNER FILE: streamlearn replay with one learner -> "events acc time"
sl() {
  printf '%s\nlearners:\n  - %s\n' "$2" "$3" >"$tmp/$1.yaml"
  local t; t=$(best_time "$SL" replay -c "$tmp/$1.yaml" --report json "$4")
  awk -v t="$t" -F'[:,]' '/"events"/ { e = $2 + 0 } /"accuracy"/ { a = $2 * 100 }
    END { printf "%d %.2f %s\n", e, a, t }' "$tmp/out"
}
# vw FILE ARGS...: progressive 0-1 loss with --binary -> "examples acc time"
vw() {
  local f=$1; shift
  local t; t=$(best_time "$VW" --binary -b 18 "$@" -d "$f")
  awk -v t="$t" '/^number of examples =/ { n = $NF } /^average loss =/ { l = $NF }
    END { if (n == "") { print "vw failed" > "/dev/stderr"; exit 1 } printf "%d %.2f %s\n", n, 100 * (1 - l), t }' "$tmp/out"
}

adagrad='{name: adagrad, algorithm: adagrad, bias: true}'                  # hinge, eta 1, normalized
plain='{name: adagrad, algorithm: adagrad, normalized: false, bias: true}' # the default config's
ogd='{name: ogd, algorithm: ogd, loss: logistic, eta: 0.5, bias: true}'  # eta/sqrt(t)
libsvm_in='input: {format: libsvm}'
sms_in=$'input: {format: tsv, positive: [spam], negative: [ham]}\nfeatures: {text: {ngrams: 2}}'
sms=$DATA/sms_spam_collection/SMSSpamCollection

echo "streamlearn $(cd "$repo" && git describe --always --dirty 2>/dev/null || echo '?'), VW $("$VW" --version | awk 'NR == 1 { print $1 }'), $(date -u +%F), $(nproc) cores; accuracy % (fastest wall seconds of $REPEAT runs)"
echo
# VW's runs, one column each: "header<TAB>options". VW's default update is
# adaptive, normalized and invariant with learning rate 0.5 (and the squared
# loss); with --sgd its learning rate defaults to 10, decaying as 1/sqrt(t).
vw_runs=(
  $'VW default, hinge\t--loss_function hinge'
  $'VW default, logistic\t--loss_function logistic'
  $'VW default (squared loss)\t--loss_function squared'
  $'VW default, hinge, -l 1\t--loss_function hinge -l 1'
  $'VW --adaptive --normalized, hinge, -l 1\t--adaptive --normalized --loss_function hinge -l 1'
  $'VW --sgd, logistic\t--sgd --loss_function logistic'
  $'VW --sgd -l 0.5, logistic\t--sgd -l 0.5 --loss_function logistic'
)
head="| data set | events | streamlearn adagrad | streamlearn adagrad, plain | streamlearn ogd (logistic) |"
rule="|---|---|---|---|---|"
for run in "${vw_runs[@]}"; do head+=" ${run%%$'\t'*} |"; rule+="---|"; done
echo "$head"
echo "$rule"

row() { # row LABEL SL_INPUT SL_FILE VW_FILE [VW options for every run]
  local label=$1 in=$2 slf=$3 vwf=$4; shift 4
  local ev n acc t line run opts
  sl adagrad "$in" "$adagrad" "$slf" >"$tmp/r"; read -r ev acc t <"$tmp/r"
  line="| $label | $ev | $acc ($t s) |"
  sl plain "$in" "$plain" "$slf" >"$tmp/r"; read -r n acc t <"$tmp/r"
  line+=" $acc ($t s) |"
  sl ogd "$in" "$ogd" "$slf" >"$tmp/r"; read -r n acc t <"$tmp/r"
  line+=" $acc ($t s) |"
  [[ $n == "$ev" ]] || echo "WARNING: $label: streamlearn read $ev then $n events" >&2
  for run in "${vw_runs[@]}"; do
    read -ra opts <<<"${run#*$'\t'}"
    vw "$vwf" "$@" "${opts[@]}" >"$tmp/r"; read -r n acc t <"$tmp/r"
    [[ $n == "$ev" ]] || echo "WARNING: $label: streamlearn read $ev events, VW $n examples" >&2
    line+=" $acc ($t s) |"
  done
  echo "$line"
}

# Both tools read uncompressed text: the .gz sets are unpacked first.
gzip -cd "$DATA/ijcnn1/ijcnn1.trn.gz" >"$tmp/ijcnn1.svm"
gzip -cd "$DATA/reuters_lasvm/reuters.trn.gz" >"$tmp/reuters.svm"
libsvm2vw "$tmp/ijcnn1.svm" >"$tmp/ijcnn1.vw"
libsvm2vw "$tmp/reuters.svm" >"$tmp/reuters.vw"
libsvm2vw "$tmp/w8a.shuffled" >"$tmp/w8a.vw"
libsvm2vw "$DATA/a9a/a9a" >"$tmp/a9a.vw"
sms2vw "$sms" >"$tmp/sms.vw"
sms2vw_ngram "$sms" >"$tmp/sms-ngram.vw"

row "ijcnn1 (train)" "$libsvm_in" "$tmp/ijcnn1.svm" "$tmp/ijcnn1.vw"
row "Reuters money-fx (train)" "$libsvm_in" "$tmp/reuters.svm" "$tmp/reuters.vw"
row "w8a, shuffled (PCG 1,1)" "$libsvm_in" "$tmp/w8a.shuffled" "$tmp/w8a.vw"
row "a9a" "$libsvm_in" "$DATA/a9a/a9a" "$tmp/a9a.vw"
row "SMS spam, VW fed counts" "$sms_in" "$sms" "$tmp/sms.vw"
row "SMS spam, VW --ngram 2" "$sms_in" "$sms" "$tmp/sms-ngram.vw" --ngram 2
