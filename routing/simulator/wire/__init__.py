"""One module per wire format the simulator speaks; ``base`` holds the contract they share."""
