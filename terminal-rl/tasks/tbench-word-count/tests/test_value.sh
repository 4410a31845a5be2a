[ "$(tr -d ' \n' < /workspace/word_count.txt)" = 6 ]
