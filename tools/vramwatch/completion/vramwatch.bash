# bash completion for vramwatch: commands, each command's options, and the files they take.
# Installed as bash-completion/completions/vramwatch; plain bash (compgen), so it also works when
# sourced without the bash-completion package. Every option a command's --help lists must be
# here: tests/cli/manpage.py checks it, by completing "vramwatch COMMAND --".

_vramwatch_commands="run report advise timeline fit merge top sim help"

# The options of each command; a trailing '=' marks one that takes a value.
_vramwatch_options() {
    case "$1" in
    run) echo "--dir= --limit= --observe --sim= --tensors --no-companion --color= --help" ;;
    report) echo "--json --full --color= --help" ;;
    advise) echo "--json --brief --target= --headroom= --help" ;;
    timeline) echo "-o --output= --format= --at= --full --color= --help" ;;
    fit) echo "--limit= --headroom= --flag= --settle= --sim= --json -h --help" ;;
    top) echo "--once --interval= --help" ;;
    merge) echo "-o --output= --help" ;;
    sim) echo "--env --help" ;;
    "") echo "--help --version -h -V" ;;
    esac
}

# The simulated cards: a few sizes, and the names `vramwatch sim --help` lists under "Cards:".
_vramwatch_cards() {
    echo "8GiB 16GiB 24GiB 40GiB 80GiB"
    "${COMP_WORDS[0]}" sim --help 2>/dev/null |
        awk '/^Cards:/ { on = 1; next } on && !NF { exit } on { print $1 }'
}

# Completes the value of option $1 (of command $2) from the word $3.
_vramwatch_value() {
    local opt="$1" cmd="$2" cur="$3"
    case "$opt" in
    --dir)
        COMPREPLY=($(compgen -d -- "$cur"))
        ;;
    -o | --output)
        COMPREPLY=($(compgen -f -- "$cur"))
        ;;
    --format)
        COMPREPLY=($(compgen -W "svg html trace collapsed speedscope torch-snapshot" -- "$cur"))
        ;;
    --at)
        COMPREPLY=($(compgen -W "peak failure" -- "$cur"))
        ;;
    --color)
        COMPREPLY=($(compgen -W "auto always never" -- "$cur"))
        ;;
    --limit | --target)
        COMPREPLY=($(compgen -W "8GiB 16GiB 24GiB 40GiB 80GiB 90%" -- "$cur"))
        ;;
    --headroom)
        COMPREPLY=($(compgen -W "5 10 15 20" -- "$cur"))
        ;;
    --sim)
        COMPREPLY=($(compgen -W "$(_vramwatch_cards)" -- "$cur"))
        ;;
    *)
        COMPREPLY=()
        ;;
    esac
}

_vramwatch() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD - 1]}"
    local cmd="" i word card=""
    COMPREPLY=()
    # The command, and whether a "--" before the cursor hands the rest to the wrapped program.
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        if [[ -z "$cmd" && "$word" != -* ]]; then
            cmd="$word"
        elif [[ "$cmd" == run && "$word" != -* && "$word" != "=" &&
            " $(_vramwatch_options run) " != *" ${COMP_WORDS[i - 1]}= "* &&
            "${COMP_WORDS[i - 1]}" != "=" ]]; then
            # run's "--" may be left out: its first operand is the program, the rest its own.
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0
        elif [[ "$cmd" == sim && "$word" != -* && -z "$card" ]]; then
            card="$word" # sim's first operand is the card, then the program
        elif [[ "$cmd" == sim && "$word" != -* ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0
        elif [[ -n "$cmd" && "$word" == "--" ]]; then
            if ((i == COMP_CWORD - 1)); then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return 0
        fi
    done
    if [[ -z "$cmd" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W "$(_vramwatch_options "")" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$_vramwatch_commands" -- "$cur"))
        fi
        return 0
    fi
    if [[ "$cmd" == help ]]; then
        COMPREPLY=($(compgen -W "${_vramwatch_commands% help}" -- "$cur"))
        return 0
    fi
    local opts
    opts="$(_vramwatch_options "$cmd")"
    # "--name=VALUE" in one word: bash splits at '=' when it is a word break, or not.
    if [[ "$cur" == --*=* ]]; then
        local value="${cur#*=}"
        _vramwatch_value "${cur%%=*}" "$cmd" "$value"
        return 0
    fi
    if [[ "$cur" == "=" && "$prev" == -* ]]; then
        _vramwatch_value "$prev" "$cmd" ""
        return 0
    fi
    if [[ "$prev" == "=" && COMP_CWORD -ge 2 ]]; then
        _vramwatch_value "${COMP_WORDS[COMP_CWORD - 2]}" "$cmd" "$cur"
        return 0
    fi
    # The value of an option given apart: "--limit 8G".
    local o
    for o in $opts; do
        if [[ "$o" == *= && "$prev" == "${o%=}" ]] || [[ "$o" == -o && "$prev" == -o ]]; then
            _vramwatch_value "$prev" "$cmd" "$cur"
            return 0
        fi
    done
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "${opts//=/}" -- "$cur"))
        return 0
    fi
    case "$cmd" in
    run)
        # The program to run ("--" before it is optional).
        COMPREPLY=($(compgen -c -- "$cur"))
        ;;
    fit)
        # Before "--": options only; the wrapped command goes after it.
        COMPREPLY=($(compgen -W "-- ${opts//=/}" -- "$cur"))
        ;;
    sim)
        # The card, then the program to run ("--" between them is optional).
        if [[ -z "$card" ]]; then
            COMPREPLY=($(compgen -W "$(_vramwatch_cards)" -- "$cur"))
        else
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        ;;
    top)
        # The folder the processes keep their files in.
        COMPREPLY=($(compgen -d -- "$cur"))
        ;;
    *)
        # Reports: JSON files and folders to find them in.
        COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur"))
        ;;
    esac
    return 0
}

complete -o filenames -F _vramwatch vramwatch
