"""A deterministic simulator of Kafka's replica / high-watermark protocol: logs, fetch, ISR,
elections, leader epochs, protocol generations, scenarios, invariants and an explorer."""
