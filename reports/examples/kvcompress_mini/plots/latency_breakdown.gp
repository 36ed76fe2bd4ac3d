# Written by kvbench report; re-render with: gnuplot latency_breakdown.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'latency_breakdown.png'
$lat << EOD
0 0.001207633333 0.2372905167 0.7008576333
1 0.1892977594 0.124650594 0.7565134361
2 0.0009199008264 0.08365047934 0.5573007686
3 0.001030090909 0.09550379339 0.5304517025
4 0.00100077686 0.1028624876 0.6751722893
5 0.0008620909091 0.08888766116 0.5056564793
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
