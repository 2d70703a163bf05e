#!/usr/bin/env bash
# Plot the table of `shardbench compare` (it writes WORK/compare.tsv and runs this for --plot) as
# a PNG: images/s per format against the step's demand, CPU-milliseconds per image, the cores
# needed to keep the step fed, and the trade-off itself: the RAM that would hold ImageNet stored
# each way against images/s, warm and cold. Log scales: the formats differ by orders of magnitude.
#   scripts/plot-compare.sh TSV OUT.png [DEMAND]
# TSV: "format images_per_s cpu_s_per_image bytes cores_needed step_util [cold_images_per_s
# bytes_per_sample ram_gib_at_imagenet]" per line, '#' comments (without the last three columns
# the trade-off panel is left out).
# DEMAND: images/s the step consumes (drawn as a line; 0 or absent: no line).
# exit status: 0 written, 1 failed, 2 usage error, 3 gnuplot is not installed (nothing written)
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: scripts/plot-compare.sh TSV OUT.png [DEMAND]" >&2
  exit 2
fi
tsv=$1 out=$2 demand=${3:-0}
[ -r "$tsv" ] || { echo "plot-compare.sh: cannot read $tsv" >&2; exit 1; }
command -v gnuplot >/dev/null || {
  echo "plot-compare.sh: gnuplot not found (Debian: apt-get install gnuplot-nox)" >&2
  exit 3
}
# gnuplot reads the values itself; the names only reach it as data, never as code
cols=$(awk -F'\t' '!/^#/ && NF { print NF; exit }' "$tsv")
panels=3
[ "${cols:-0}" -ge 9 ] && panels=4
term="pngcairo size $((470 * panels)),520 font 'sans,10'"
gnuplot -e "set terminal $term" /dev/null 2>/dev/null || term="png size $((470 * panels)),520"
gnuplot <<GP
set terminal $term
set output "$(printf '%s' "$out" | sed 's/["\\]/\\&/g')"
file = "$(printf '%s' "$tsv" | sed 's/["\\]/\\&/g')"
demand = $demand + 0
set datafile separator "\t"
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
set logscale y
set xtics rotate by -30 nomirror
set key top left
set multiplot layout 1,$panels title "shardbench compare: every format built from the same images"
set title "images/s (higher is better)"
set format y "%.0s%c"
if (demand > 0) {
  plot file using 0:2:xtic(1) with boxes lc rgb "#3a78b5" notitle, \
       demand with lines lw 2 dt 2 lc rgb "#c0392b" title sprintf("step demand %.0f/s", demand)
} else {
  plot file using 0:2:xtic(1) with boxes lc rgb "#3a78b5" notitle
}
set title "CPU-ms per image (lower is better)"
set format y "%g"
plot file using 0:(\$3 * 1000):xtic(1) with boxes lc rgb "#e69f00" notitle
set title "cores needed to feed the step"
plot file using 0:5:xtic(1) with boxes lc rgb "#2a9d55" notitle
if ($panels == 4) {
  set title "trade-off: RAM to cache ImageNet stored so vs images/s"
  set logscale x
  set xlabel "GiB for 1.28M images"
  set xtics norotate
  set format x "%g"
  set format y "%.0s%c"
  set key bottom left
  plot file using 9:2 with points pt 7 ps 1.3 lc rgb "#3a78b5" title "warm", \
       file using 9:7 with points pt 6 ps 1.3 lc rgb "#c0392b" title "cold", \
       file using 9:2:1 with labels offset char 0,0.9 font ",8" notitle
}
unset multiplot
GP
