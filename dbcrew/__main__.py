from dbcrew.cli import main

main()
