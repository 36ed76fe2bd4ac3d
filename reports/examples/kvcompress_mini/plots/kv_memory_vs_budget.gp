# Written by kvbench report; re-render with: gnuplot kv_memory_vs_budget.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'kv_memory_vs_budget.png'
set yrange [0:*]
$m1 << EOD
32 40
64 80
128 160
256 320
EOD
$m2 << EOD
32 160
64 160
128 320
256 640
EOD
$m3 << EOD
32 136
64 184
128 344
256 640
EOD
$m4 << EOD
32 190
64 172
128 337
256 656
EOD
$m5 << EOD
32 140
64 189
128 316
256 646
EOD
set grid
set key outside right top
set border 3
set tics nomirror
set title 'Resident KV: perplexity (KiB)'
set ylabel 'KiB'
set logscale x 2
set xtics (32, 64, 128, 256)
set xrange [24.61538462:332.8]
set xlabel 'budget B (KV entries attended per head)'
plot 1040 with lines dt 2 lw 2 lc rgb '#000000' title 'full (reference)', $m1 using 1:2 with linespoints pt 7 lw 2 lc rgb '#1f77b4' title 'h2o', $m2 using 1:2 with linespoints pt 7 lw 2 lc rgb '#ff7f0e' title 'snapkv', $m3 using 1:2 with linespoints pt 7 lw 2 lc rgb '#2ca02c' title 'pyramidkv', $m4 using 1:2 with linespoints pt 7 lw 2 lc rgb '#d62728' title 'ada_snapkv', $m5 using 1:2 with linespoints pt 7 lw 2 lc rgb '#9467bd' title 'kv_compress'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'kv_memory_vs_budget.svg'
replot
unset output
