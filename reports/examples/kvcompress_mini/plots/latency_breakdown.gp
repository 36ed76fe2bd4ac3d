# Written by kvbench report; re-render with: gnuplot latency_breakdown.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'latency_breakdown.png'
$lat << EOD
0 0.0001081578947 0.6231900632 0.6412549053 0
1 0.5745627158 0.5283808316 0.9739975474 2062260
2 9.424210526e-05 0.4920596211 0.5542320632 16744206
3 9.947368421e-05 0.3300519263 0.3690522737 2924588
4 0.0001003263158 0.2574760842 0.4432487895 14034728
5 0.0001754736842 0.3520945158 0.4971959158 9725885
EOD
set grid
set key outside right top
set border 3
set tics nomirror
set title 'Decode latency per token at budget 256 (reference methods at full KV)'
set ylabel 'ms per token'
set yrange [0:*]
set boxwidth 0.6
set style fill solid border lc rgb 'black'
set xtics ('full' 0, 'h2o' 1, 'snapkv' 2, 'pyramidkv' 3, 'ada_snapkv' 4, 'kv_compress' 5) rotate by -30
set xrange [-0.6:5.6]
plot $lat using 1:($2+$3+$4):5 with boxes lc rgb variable notitle fs solid 0.2, $lat using 1:($2+$3):5 with boxes lc rgb variable notitle fs solid 0.55, $lat using 1:2:5 with boxes lc rgb variable notitle fs solid 1.0, keyentry with boxes fs solid 1.0 lc rgb 'gray30' title 'selection', keyentry with boxes fs solid 0.55 lc rgb 'gray30' title 'attention', keyentry with boxes fs solid 0.2 lc rgb 'gray30' title 'rest'
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'latency_breakdown.svg'
replot
unset output
