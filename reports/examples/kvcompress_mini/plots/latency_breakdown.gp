# Written by kvbench report; re-render with: gnuplot latency_breakdown.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'latency_breakdown.png'
$lat << EOD
0 0.0008145333333 0.9223530167 2.64779405
1 0.5109280602 5.140480105 155.8568996
2 0.006283892562 3.273776157 135.5495234
3 0.0009226033058 0.6201175455 1.302263463
4 0.001335 1.235769645 1.81403281
5 0.001994768595 1.464912736 3.442255273
EOD
set grid
set key outside right top
set border 3
set tics nomirror
set title "Decode latency per token at budget 256 (lower is better)\nbudget-less methods (Full) attend the whole KV"
set ylabel 'ms per token (lower is better)'
set yrange [0:*]
set boxwidth 0.6
set style fill solid 1.0 border lc rgb 'black'
set xtics ('full' 0, 'h2o' 1, 'snapkv' 2, 'pyramidkv' 3, 'ada_snapkv' 4, 'kv_compress' 5) rotate by -30
set xrange [-0.6:5.6]
plot $lat using 1:($2+$3+$4) with boxes lc rgb '#cccccc' title 'rest of the step', $lat using 1:($2+$3) with boxes lc rgb '#4c72b0' title 'attention', $lat using 1:2 with boxes lc rgb '#dd8452' title 'selection'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'latency_breakdown.svg'
replot
unset output
