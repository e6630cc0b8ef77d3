from dbcrew.cli.entry import main

main()
