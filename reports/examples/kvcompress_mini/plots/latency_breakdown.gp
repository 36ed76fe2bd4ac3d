# Written by kvbench report; re-render with: gnuplot latency_breakdown.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'latency_breakdown.png'
$lat << EOD
0 0.0002999130435 1.166818365 1.236207148
1 0.1994212595 0.3874465954 0.8562041679
2 0.0007404126984 0.3209369286 0.9161362778
3 0.0007018770492 0.3288037541 0.8875841967
4 0.000674503937 1.477500583 0.8922035512
5 0.000598584 1.314271816 0.859546184
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
