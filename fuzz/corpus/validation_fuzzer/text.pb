
Once upon a time"333?(fff?((2

:HPbr1