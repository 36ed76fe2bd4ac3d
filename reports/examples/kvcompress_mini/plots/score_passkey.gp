# Written by kvbench report; re-render with: gnuplot score_passkey.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'score_passkey.png'
set grid
set key outside right top
set border 3
set tics nomirror
set title 'Score (passkey_accuracy, higher is better) on passkey'
set ylabel 'passkey_accuracy (higher is better)'
set logscale x 2
set xtics (32, 64, 128, 256)
set xrange [24.61538462:332.8]
set xlabel 'budget B (KV entries attended per head)'
$s1 << EOD
32 0
64 5
128 5
256 15
EOD
$s2 << EOD
32 15
64 80
128 95
256 95
EOD
$s3 << EOD
32 35
64 90
128 95
256 95
EOD
$s4 << EOD
32 25
64 70
128 95
256 95
EOD
$s5 << EOD
32 45
64 90
128 95
256 95
EOD
plot 100 with lines lw 2 lc rgb '#000000' dt 2 title 'full (reference)', $s1 using 1:2 with linespoints pt 5 ps 1.3 lw 2 lc rgb '#0072b2' dt 1 title 'h2o', $s2 using 1:2 with linespoints pt 7 ps 1.3 lw 2 lc rgb '#e69f00' dt 1 title 'snapkv', $s3 using 1:2 with linespoints pt 9 ps 1.3 lw 2 lc rgb '#669966' dt (6,3) title 'pyramidkv', $s4 using 1:2 with linespoints pt 11 ps 1.3 lw 2 lc rgb '#d55e00' dt (8,3,2,3) title 'ada_snapkv', $s5 using 1:2 with linespoints pt 13 ps 1.3 lw 2 lc rgb '#cc79a7' dt (2,2) title 'kv_compress'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'score_passkey.svg'
replot
unset output
