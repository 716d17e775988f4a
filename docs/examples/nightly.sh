python report.py --day {{ ds }} > report.txt
