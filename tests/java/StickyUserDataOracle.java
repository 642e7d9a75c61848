package org.apache.kafka.clients.consumer;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.common.TopicPartition;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Kafka's StickyAssignor on its user data, for tests/test_kafka_python_adapter.py. Compiled
 * against the Java oracle's classes (shared/tools/java-oracle). One command a line on stdin,
 * one answer a line on stdout:
 *
 *   encode GENERATION TOPIC:P,P TOPIC:P ...  -> hex of serializeTopicPartitionAssignment
 *   decode HEX                               -> "GENERATION TOPIC:P TOPIC:P ..." as the leader's
 *                                               memberData reads it (generation "none" for V0)
 *   lead COUNTS MEMBER=HEX ...               -> "MEMBER=TOPIC:P,... ..." from StickyAssignor.assign;
 *                                               COUNTS is TOPIC:N,TOPIC:N, every member
 *                                               subscribes to every topic, HEX "-" is no user data
 */
public final class StickyUserDataOracle {
    private StickyUserDataOracle() { }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            switch (words[0]) {
                case "encode": System.out.println(encode(words)); break;
                case "decode": System.out.println(decode(words[1])); break;
                case "lead": System.out.println(lead(words)); break;
                default: throw new IllegalArgumentException("unknown command " + words[0]);
            }
        }
    }

    static String encode(String[] words) {
        int generation = Integer.parseInt(words[1]);
        List<TopicPartition> owned = new ArrayList<>();
        for (int i = 2; i < words.length; i++) {
            String[] topicAndPartitions = words[i].split(":");
            for (String partition : topicAndPartitions[1].split(",")) {
                owned.add(new TopicPartition(topicAndPartitions[0], Integer.parseInt(partition)));
            }
        }
        ByteBuffer buffer = StickyAssignor.serializeTopicPartitionAssignment(
            new AbstractStickyAssignor.MemberData(owned, Optional.of(generation)));
        return hex(buffer);
    }

    static String decode(String hex) {
        AbstractStickyAssignor.MemberData data = new StickyAssignor().memberData(
            new Subscription(List.of("unused"), ByteBuffer.wrap(bytes(hex))));
        StringBuilder out = new StringBuilder(data.generation.map(String::valueOf).orElse("none"));
        for (TopicPartition tp : data.partitions) {
            out.append(' ').append(tp.topic()).append(':').append(tp.partition());
        }
        return out.toString();
    }

    static String lead(String[] words) {
        Map<String, Integer> counts = new HashMap<>();
        for (String entry : words[1].split(",")) {
            String[] topicAndCount = entry.split(":");
            counts.put(topicAndCount[0], Integer.parseInt(topicAndCount[1]));
        }
        List<String> topics = new ArrayList<>(counts.keySet());
        Map<String, Subscription> subscriptions = new HashMap<>();
        for (int i = 2; i < words.length; i++) {
            String[] memberAndHex = words[i].split("=");
            ByteBuffer userData = memberAndHex[1].equals("-") ? null : ByteBuffer.wrap(bytes(memberAndHex[1]));
            subscriptions.put(memberAndHex[0], new Subscription(topics, userData));
        }
        Map<String, List<TopicPartition>> assignment = new StickyAssignor().assign(counts, subscriptions);
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, List<TopicPartition>> entry : new TreeMap<>(assignment).entrySet()) {
            List<String> names = new ArrayList<>();
            for (TopicPartition tp : entry.getValue()) {
                names.add(tp.topic() + ":" + tp.partition());
            }
            names.sort(null);
            if (out.length() > 0) out.append(' ');
            out.append(entry.getKey()).append('=').append(String.join(",", names));
        }
        return out.toString();
    }

    static String hex(ByteBuffer buffer) {
        StringBuilder out = new StringBuilder();
        while (buffer.hasRemaining()) {
            out.append(String.format("%02x", buffer.get()));
        }
        return out.toString();
    }

    static byte[] bytes(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }
}
