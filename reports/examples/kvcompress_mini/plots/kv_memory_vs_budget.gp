# Written by kvbench report; re-render with: gnuplot kv_memory_vs_budget.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'kv_memory_vs_budget.png'
set yrange [0:*]
set grid
set key outside right top
set border 3
set tics nomirror
set title 'Resident KV (KiB, lower is better) on passkey'
set ylabel 'KiB (lower is better)'
set logscale x 2
set xtics (32, 64, 128, 256)
set xrange [24.61538462:332.8]
set xlabel 'budget B (KV entries attended per head)'
$s1 << EOD
32 96
64 192
128 384
256 768
EOD
$s2 << EOD
32 136.8
64 237.6
128 480
256 960
EOD
$s3 << EOD
32 132.4
64 243.2
128 424.6
256 936
EOD
$s4 << EOD
32 132.6
64 236.2
128 454.4
256 867
EOD
$s5 << EOD
32 136.2
64 240
128 463.8
256 945.6
EOD
plot 3840 with lines lw 2 lc rgb '#000000' dt 2 title 'full (reference)', $s1 using 1:2 with linespoints pt 5 ps 1.3 lw 2 lc rgb '#0072b2' dt 1 title 'h2o', $s2 using 1:2 with linespoints pt 7 ps 1.3 lw 2 lc rgb '#e69f00' dt 1 title 'snapkv', $s3 using 1:2 with linespoints pt 9 ps 1.3 lw 2 lc rgb '#669966' dt (6,3) title 'pyramidkv', $s4 using 1:2 with linespoints pt 11 ps 1.3 lw 2 lc rgb '#d55e00' dt (8,3,2,3) title 'ada_snapkv', $s5 using 1:2 with linespoints pt 13 ps 1.3 lw 2 lc rgb '#cc79a7' dt (2,2) title 'kv_compress'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'kv_memory_vs_budget.svg'
replot
unset output
