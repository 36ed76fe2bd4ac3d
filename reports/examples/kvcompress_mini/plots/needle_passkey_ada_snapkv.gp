# Written by kvbench report; re-render with: gnuplot needle_passkey_ada_snapkv.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'needle_passkey_ada_snapkv.png'
$h << EOD
0 0 100
0 1 100
0 2 100
0 3 100
0 4 100
0 5 100
0 6 100
0 7 100
0 8 100
0 9 100
0 10 100
0 11 100
0 12 0
0 13 100
0 14 100
0 15 100
0 16 100
0 17 100
0 18 100
0 19 100
EOD
set title 'passkey accuracy: ada_snapkv at budget 256'
set xlabel 'context length (tokens)'
set ylabel 'needle depth'
set xtics ('1024' 0)
set ytics ('0%%' 0, '5%%' 1, '11%%' 2, '16%%' 3, '21%%' 4, '26%%' 5, '32%%' 6, '37%%' 7, '42%%' 8, '47%%' 9, '53%%' 10, '58%%' 11, '63%%' 12, '68%%' 13, '74%%' 14, '79%%' 15, '84%%' 16, '89%%' 17, '95%%' 18, '100%%' 19)
set xrange [-0.5:0.5]
set yrange [-0.5:19.5]
set cbrange [0:100]
set cblabel 'accuracy (%)'
set palette defined (0 '#d73027', 50 '#fee08b', 100 '#1a9850')
set tics nomirror
plot $h using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette notitle, $h using 1:2:(sprintf('%.0f', $3)) with labels notitle
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'needle_passkey_ada_snapkv.svg'
replot
unset output
