# Written by kvbench report; re-render with: gnuplot score_perplexity.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'score_perplexity.png'
set grid
set key outside right top
set border 3
set tics nomirror
set title 'Score (perplexity, lower is better)'
set ylabel 'perplexity (lower is better)'
set logscale x 2
set xtics (32, 64, 128, 256)
set xrange [24.61538462:332.8]
set xlabel 'budget B (KV entries attended per head)'
$s1 << EOD
32 97.617516
64 98.51607791
128 101.9065582
256 104.4774169
EOD
$s2 << EOD
32 101.4862088
64 105.1339901
128 105.3830844
256 105.092748
EOD
$s3 << EOD
32 107.9536532
64 112.9690924
128 104.6491904
256 105.092748
EOD
$s4 << EOD
32 102.9001011
64 104.6422219
128 104.3788124
256 103.4341275
EOD
$s5 << EOD
32 99.16210987
64 102.999352
128 103.0452551
256 102.5859922
EOD
plot 104.7231496 with lines lw 2 lc rgb '#000000' dt 2 title 'full (reference)', $s1 using 1:2 with linespoints pt 5 ps 1.3 lw 2 lc rgb '#0072b2' dt 1 title 'h2o', $s2 using 1:2 with linespoints pt 7 ps 1.3 lw 2 lc rgb '#e69f00' dt 1 title 'snapkv', $s3 using 1:2 with linespoints pt 9 ps 1.3 lw 2 lc rgb '#669966' dt (6,3) title 'pyramidkv', $s4 using 1:2 with linespoints pt 11 ps 1.3 lw 2 lc rgb '#d55e00' dt (8,3,2,3) title 'ada_snapkv', $s5 using 1:2 with linespoints pt 13 ps 1.3 lw 2 lc rgb '#cc79a7' dt (2,2) title 'kv_compress'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'score_perplexity.svg'
replot
unset output
