print("pushcast")
