# Written by kvbench report; re-render with: gnuplot latency_breakdown.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'latency_breakdown.png'
$lat << EOD
0 0.0004690210526 0.7410446 2.281453042
1 0.5182433895 0.6124432947 1.065260179
2 0.0008385157895 0.3446192421 1.0766008
3 0.0008068842105 0.7310340737 1.0131194
4 0.0008030736842 0.3513179579 0.8788026632
5 0.0007596421053 0.3778210526 1.032596653
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
