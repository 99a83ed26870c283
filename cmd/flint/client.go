package main

func client(args []string) int { panic("not written yet") }
