# Loaded by the operator as a script file (template_ext) and rendered before it runs.
count=$(for word in {{ params.words }}; do echo "$word"; done | wc -l)
echo "$count"
# The token reaches the command through private_env; the task log shows it masked.
echo "token: $API_TOKEN"
# The task's return value (xcom_path), copied out too, as an asset (outputs).
printf '{"words": %d}\n' "$count" > counts.json
