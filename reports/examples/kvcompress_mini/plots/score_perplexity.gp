# Written by kvbench report; re-render with: gnuplot score_perplexity.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'score_perplexity.png'
$m1 << EOD
32 97.61744324
64 98.51607916
128 101.9065916
256 104.4773364
EOD
$m2 << EOD
32 101.4862588
64 105.1341297
128 105.38321
256 105.0927282
EOD
$m3 << EOD
32 107.9536293
64 112.9690555
128 104.6491484
256 105.0927282
EOD
$m4 << EOD
32 102.9000311
64 104.6421033
128 104.378925
256 103.4340223
EOD
$m5 << EOD
32 99.16207464
64 102.9993333
128 103.0452538
256 102.5860476
EOD
set grid
set key outside right top
set border 3
set tics nomirror
set title 'Score: perplexity (perplexity)'
set ylabel 'Score: perplexity (perplexity)'
set logscale x 2
set xtics (32, 64, 128, 256)
set xrange [24.61538462:332.8]
set xlabel 'budget B (KV entries attended per head)'
plot 104.7231326 with lines dt 2 lw 2 lc rgb '#000000' title 'full (reference)', $m1 using 1:2 with linespoints pt 7 lw 2 lc rgb '#1f77b4' title 'h2o', $m2 using 1:2 with linespoints pt 7 lw 2 lc rgb '#ff7f0e' title 'snapkv', $m3 using 1:2 with linespoints pt 7 lw 2 lc rgb '#2ca02c' title 'pyramidkv', $m4 using 1:2 with linespoints pt 7 lw 2 lc rgb '#d62728' title 'ada_snapkv', $m5 using 1:2 with linespoints pt 7 lw 2 lc rgb '#9467bd' title 'kv_compress'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'score_perplexity.svg'
replot
unset output
