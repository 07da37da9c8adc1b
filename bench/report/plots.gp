# bench/report.sh's plots, drawn from the data files bench/report/tables.py writes into the current folder:
#   throughput.png         aggregate output tokens/s and latencies against concurrent streams
#   latency.png            time to first token and inter-token latency, as distributions (CDFs) per stream count
#   decode_vs_context.png  decode tokens/s against the positions of context already in the cache
#
#   cd OUT && gnuplot bench/report/plots.gp
set terminal pngcairo size 960,540 font "sans,11" noenhanced
set key autotitle columnhead
set grid

# The distributions' columns: the percentile, then one per stream count (read before any range is set).
stats "ttft.dat" using 1 nooutput
columns = STATS_columns

# ---- Throughput against concurrency ----
set output "throughput.png"
set title "Through the gateway: aggregate throughput and latency against concurrent streams"
set logscale x 2
set xlabel "concurrent streams"
set ylabel "output tokens/s (all streams)"
set y2label "milliseconds"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key left top
plot "throughput.dat" using 1:2 with linespoints lw 2 pt 7 title "output tokens/s", \
     "" using 1:3 axes x1y2 with linespoints dt 2 pt 5 title "time to first token p50 (ms)", \
     "" using 1:4 axes x1y2 with linespoints dt 3 pt 9 title "inter-token p50 (ms)", \
     "" using 1:5 axes x1y2 with linespoints dt 4 pt 11 title "inter-token p99 (ms)"
unset logscale x
unset y2label
unset y2tics
set ytics mirror
set autoscale y2

# ---- Latency distributions ----
set output "latency.png"
set terminal pngcairo size 1200,500 font "sans,11" noenhanced
set multiplot layout 1,2 title "Latency distributions per number of concurrent streams"
set logscale x 10
set ylabel "percentile"
set yrange [0:100]
set key right bottom
set title "time to first token"
set xlabel "milliseconds"
plot for [i = 2:columns] "ttft.dat" using i:1 with lines lw 2 title columnhead(i)
set title "inter-token latency"
plot for [i = 2:columns] "itl.dat" using i:1 with lines lw 2 title columnhead(i)
unset multiplot
unset logscale x

# ---- Decode against context ----
set output "decode_vs_context.png"
set terminal pngcairo size 960,540 font "sans,11" noenhanced
set title "Decode against context length (one stream)"
set xlabel "positions of context in the KV cache"
set ylabel "tokens/s"
set y2label "of the rate at position 0"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:1.1]
set key right top
plot "depth.dat" using 1:2:3:4 with yerrorlines lw 2 pt 7 title "decode tokens/s (median, min-max)", \
     "" using 1:5 axes x1y2 with linespoints dt 2 pt 5 title "of the rate at 0"
