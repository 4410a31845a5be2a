test -f /workspace/word_count.txt
