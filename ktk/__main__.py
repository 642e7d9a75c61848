from ktk.cli import main

main()
