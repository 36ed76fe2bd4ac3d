# Written by kvbench report; re-render with: gnuplot needle_passkey_full.gp
set terminal pngcairo noenhanced size 860,520 font 'DejaVu Sans,11'
set output 'needle_passkey_full.png'
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
EOD
set title 'passkey accuracy: full at budget 256'
set xlabel 'context length (tokens)'
set ylabel 'needle depth'
set xtics ('1024' 0)
set ytics ('0%%' 0, '10%%' 1, '20%%' 2, '30%%' 3, '40%%' 4, '50%%' 5, '60%%' 6, '70%%' 7, '80%%' 8, '90%%' 9, '100%%' 10)
set xrange [-0.5:0.5]
set yrange [-0.5:10.5]
set cbrange [0:100]
set cblabel 'accuracy (%)'
set palette defined (0 '#d73027', 50 '#fee08b', 100 '#1a9850')
set tics nomirror
plot $h using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette notitle, $h using 1:2:(sprintf('%.0f', $3)) with labels notitle
set terminal svg noenhanced size 860,520 font 'DejaVu Sans,11' background rgb 'white'
set output 'needle_passkey_full.svg'
replot
unset output
